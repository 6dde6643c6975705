/* A simulation that trains a model in situ (the embedding API's example, include/ztrain/ztrain.h).
 *
 * MPI_COMM_WORLD splits into NSIM simulation ranks and the training ranks. The simulation ranks
 * make token batches (here: read from an llm.c token shard, in the order `ztrain train` reads it,
 * so the losses can be set beside the CLI's) and send them to the training ranks, which train at
 * the config's ZeRO stage over their own communicator and save a checkpoint at the end. With NSIM 0
 * each training rank makes its own batches (no rank waits on another's sends: the overhead
 * benchmark's setting, bench/api_overhead.sh).
 *
 *   sim_train CONFIG SHARD STEPS NSIM [CHECKPOINT_DIR]
 * Rank 0 of the training ranks prints "step N loss X ms Y in_calls_ms Z" for each optimizer step:
 * the step's time as the trainer measures it (from its first forward), and the time spent inside
 * the step's zt_trainer_step calls (the batch checks and the API's own work included).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ztrain/ztrain.h>

static void check(zt_status s, const char* what) {
  if (s == ZT_OK) return;
  fprintf(stderr, "sim_train: %s: %s: %s\n", what, zt_status_name(s), zt_last_error());
  MPI_Abort(MPI_COMM_WORLD, 1); /* the host's choice: this job cannot go on without its trainer */
}

/* The shard's tokens (llm.c: a 256 x int32 header, then uint16 tokens). */
static int32_t* read_shard(const char* path, int64_t* count) {
  FILE* f = fopen(path, "rb");
  int32_t header[256];
  if (!f || fread(header, sizeof header, 1, f) != 1) {
    fprintf(stderr, "sim_train: cannot read %s\n", path);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  *count = header[2];
  uint16_t* raw = malloc((size_t)*count * sizeof *raw);
  int32_t* tokens = malloc((size_t)*count * sizeof *tokens);
  if (fread(raw, sizeof *raw, (size_t)*count, f) != (size_t)*count) {
    fprintf(stderr, "sim_train: %s is shorter than its header says\n", path);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (int64_t i = 0; i < *count; ++i) tokens[i] = raw[i];
  free(raw);
  fclose(f);
  return tokens;
}

/* Training rank r's micro-batch number k: B*T inputs and their next tokens, where `ztrain train`
 * on N ranks reads it (global slice k of N*B*T tokens, wrapping at the shard's end). */
static void micro_batch(const int32_t* shard, int64_t count, int64_t k, int r, int N, int64_t B, int64_t T,
                        int32_t* batch) {
  const int64_t global = N * B * T, slices = (count - 1) / global;
  const int64_t pos = (k % slices) * global + r * B * T;
  memcpy(batch, shard + pos, (size_t)(B * T) * sizeof *batch);
  memcpy(batch + B * T, shard + pos + 1, (size_t)(B * T) * sizeof *batch);
}

/* The few config values the batches' shape follows from, out of the JSON by plain search (the
 * example needs no JSON library: the trainer checks the batch against the config anyway). */
static int64_t config_int(const char* json, const char* key, int64_t fallback) {
  const char* p = strstr(json, key);
  return p ? strtoll(strchr(p, ':') + 1, NULL, 10) : fallback;
}

int main(int argc, char** argv) {
  int provided = 0, rank = 0, size = 1;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 5) {
    if (rank == 0) fprintf(stderr, "usage: sim_train CONFIG SHARD STEPS NSIM [CHECKPOINT_DIR]\n");
    MPI_Finalize();
    return 2;
  }
  const char* config = argv[1];
  const int steps = atoi(argv[3]), nsim = atoi(argv[4]);
  const char* checkpoint = argc > 5 ? argv[5] : NULL;
  const int ntrain = size - nsim;

  FILE* f = fopen(config, "rb");
  char text[65536] = {0};
  if (!f || fread(text, 1, sizeof text - 1, f) == 0) {
    fprintf(stderr, "sim_train: cannot read %s\n", config);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  fclose(f);
  const int64_t B = config_int(text, "\"train_micro_batch_size_per_gpu\"", 1);
  const int64_t T = config_int(text, "\"seq_len\"", 1024);
  const int64_t accum = config_int(text, "\"gradient_accumulation_steps\"", 1);

  MPI_Comm group;
  const int simulating = rank < nsim;
  MPI_Comm_split(MPI_COMM_WORLD, simulating ? 0 : 1, rank, &group);
  int64_t count = 0;
  int32_t* shard = read_shard(argv[2], &count);
  int32_t* batch = malloc((size_t)(2 * B * T) * sizeof *batch);

  if (simulating) {
    /* Simulation rank s feeds the training ranks r with r % nsim == s, micro-batch by micro-batch. */
    for (int64_t k = 0; k < (int64_t)steps * accum; ++k)
      for (int r = rank; r < ntrain; r += nsim) {
        micro_batch(shard, count, k, r, ntrain, B, T, batch);
        MPI_Send(batch, (int)(2 * B * T), MPI_INT32_T, nsim + r, 0, MPI_COMM_WORLD);
      }
  } else {
    int r = 0;
    MPI_Comm_rank(group, &r);
    zt_trainer* t = NULL;
    check(zt_trainer_create(config, group, &t), "zt_trainer_create");
    double inside = 0.0;  /* seconds in zt_trainer_step since the last optimizer step */
    for (int64_t k = 0; k < (int64_t)steps * accum; ++k) {
      if (nsim > 0)
        MPI_Recv(batch, (int)(2 * B * T), MPI_INT32_T, r % nsim, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      else
        micro_batch(shard, count, k, r, ntrain, B, T, batch);
      zt_step_result res;
      const double t0 = MPI_Wtime();
      check(zt_trainer_step(t, batch, batch + B * T, B, T, &res), "zt_trainer_step");
      inside += MPI_Wtime() - t0;
      if (res.stepped && r == 0) printf("step %d loss %.17g ms %.3f in_calls_ms %.3f\n", res.step, res.loss, res.ms, 1e3 * inside);
      if (res.stepped) inside = 0.0;
    }
    if (checkpoint) check(zt_trainer_save(t, checkpoint), "zt_trainer_save");
    check(zt_trainer_destroy(t), "zt_trainer_destroy");
  }
  free(batch);
  free(shard);
  MPI_Comm_free(&group);
  MPI_Finalize();
  return 0;
}
