/* Bad use of the embedding API ends in an error status with a message, never a crash: the host
 * survives and destroys the trainer cleanly. Every rank runs the one-process checks on trainers of
 * its own (zt_trainer_create_local); with several ranks, a communicator whose ranks disagree on the
 * config follows. Prints each failed check; exits 1 if any failed.
 *   mpirun -np 2 bad_use SCRATCH_DIR
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <mpi.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ztrain/ztrain.h>

static int failures = 0;

/* A log callback: counts rank 0's lines and keeps the last. */
struct log_seen {
  int lines;
  char last[512];
};
static void count_line(void* user, const char* line) {
  struct log_seen* seen = user;
  ++seen->lines;
  snprintf(seen->last, sizeof seen->last, "%s", line);
}

/* The call returned `want` and its message holds `text`. */
static void expect(zt_status got, zt_status want, const char* text, const char* what) {
  const char* msg = zt_last_error();
  if (got != want || !strstr(msg, text)) {
    printf("FAIL: %s: got %s \"%s\", expected %s with \"%s\"\n", what, zt_status_name(got), msg, zt_status_name(want), text);
    ++failures;
  }
}

#define B 2
#define T 16
static const char* kConfig =
    "{\"model\": {\"n_layer\": 1, \"n_head\": 2, \"n_embd\": 16, \"max_seq_len\": 16, \"vocab_size\": 256},"
    " \"data\": {\"seq_len\": 16}, \"train\": {\"threads\": 1}, \"train_micro_batch_size_per_gpu\": 2}";

static void one_process(const char* scratch, int rank) {
  int32_t tokens[B * T], targets[B * T];
  for (int i = 0; i < B * T; ++i) tokens[i] = targets[i] = (i * 7) % 256;
  zt_step_result r;
  zt_trainer* t = NULL;
  char path[4096];

  if (zt_api_version() != ZT_API_VERSION) { printf("FAIL: zt_api_version %d\n", zt_api_version()); ++failures; }
  expect(zt_trainer_create_local(NULL, &t), ZT_ERR_ARGUMENT, "config is NULL", "a NULL config");
  expect(zt_trainer_create_local(kConfig, NULL), ZT_ERR_ARGUMENT, "out is NULL", "a NULL out");
  expect(zt_trainer_create_local("{\"model\": ", &t), ZT_ERR_CONFIG, "not valid JSON", "a config that is not JSON");
  if (t) { printf("FAIL: a failed create left a trainer\n"); ++failures; }
  expect(zt_trainer_create_local("/nonexistent/c.json", &t), ZT_ERR_CONFIG, "/nonexistent/c.json", "a missing config file");
  expect(zt_trainer_create_local("{\"data\": {\"seq_len\": 0}}", &t), ZT_ERR_CONFIG, "data.seq_len", "an invalid key");
  expect(zt_trainer_step(NULL, tokens, targets, B, T, &r), ZT_ERR_ARGUMENT, "NULL", "step on a NULL trainer");

  expect(zt_trainer_create_local(kConfig, &t), ZT_OK, "", "a good config");
  expect(zt_trainer_step(t, tokens, targets, B + 1, T, &r), ZT_ERR_ARGUMENT, "the config's is 2 x 16", "a batch of the wrong shape");
  tokens[5] = 300;
  expect(zt_trainer_step(t, tokens, targets, B, T, &r), ZT_ERR_ARGUMENT, "tokens[5] (row 0, position 5) is 300", "a token outside the vocabulary");
  tokens[5] = 1;
  targets[20] = -2;
  expect(zt_trainer_step(t, tokens, targets, B, T, &r), ZT_ERR_ARGUMENT, "targets[20]", "a target below -1");
  targets[20] = -1;  /* left out of the loss: fine */
  expect(zt_trainer_step(t, NULL, targets, B, T, &r), ZT_ERR_ARGUMENT, "tokens is a null pointer", "NULL tokens");
  expect(zt_trainer_step(t, tokens, targets, B, T, &r), ZT_OK, "", "a good step after bad ones");
  if (!r.stepped || r.step != 1 || !isfinite(r.loss)) { printf("FAIL: the good step: stepped %d step %d loss %g\n", r.stepped, r.step, r.loss); ++failures; }
  expect(zt_trainer_step_data(t, &r), ZT_ERR_CONFIG, "data.train", "stepping over data that is not configured");
  expect(zt_trainer_eval(t, NULL, NULL, B, T, &(double){0}), ZT_ERR_CONFIG, "no validation data", "validation without data");
  expect(zt_trainer_set_lr(t, -1.0), ZT_ERR_ARGUMENT, "lr must be", "a negative learning rate");
  expect(zt_trainer_export(t, "onnx", "/tmp/x.onnx"), ZT_ERR_ARGUMENT, "\"onnx\"", "an unknown export format");
  expect(zt_trainer_save(t, "/proc/ztrain_cannot_write_here"), ZT_ERR_CHECKPOINT, "/proc/ztrain_cannot_write_here", "a save where nothing can be written");
  expect(zt_trainer_load(t, NULL), ZT_ERR_ARGUMENT, "dir is NULL", "a NULL checkpoint folder");
  snprintf(path, sizeof path, "%s/model_%d.bin", scratch, rank);  /* each rank its own files */
  expect(zt_trainer_export(t, "llmc", path), ZT_OK, "", "an export after the failed save");
  expect(zt_trainer_step(t, tokens, targets, B, T, &r), ZT_OK, "", "a step after the failed save");
  /* The log goes where zt_trainer_set_log says, and nowhere after NULL. */
  struct log_seen seen = {0, ""};
  expect(zt_trainer_set_log(t, count_line, &seen), ZT_OK, "", "setting a log callback");
  snprintf(path, sizeof path, "%s/ck_%d", scratch, rank);
  expect(zt_trainer_save(t, path), ZT_OK, "", "a save into the scratch folder");
  if (seen.lines != 1 || !strstr(seen.last, "saved checkpoint")) {
    printf("FAIL: the log callback saw %d lines, the last \"%s\"\n", seen.lines, seen.last);
    ++failures;
  }
  expect(zt_trainer_set_log(t, NULL, NULL), ZT_OK, "", "silencing the log");
  expect(zt_trainer_save(t, path), ZT_OK, "", "a silent save");
  if (seen.lines != 1) { printf("FAIL: the log callback was called after zt_trainer_set_log(NULL)\n"); ++failures; }
  expect(zt_trainer_destroy(t), ZT_OK, "", "destroy");
  expect(zt_trainer_destroy(t), ZT_ERR_ARGUMENT, "not a live trainer", "destroy twice");
  expect(zt_trainer_step(t, tokens, targets, B, T, &r), ZT_ERR_ARGUMENT, "not a live trainer", "step on a destroyed trainer");
  expect(zt_trainer_destroy(NULL), ZT_OK, "", "destroy NULL");

  /* A fatal error: a whole run without data.train, then a non-finite step. */
  expect(zt_trainer_create_local(kConfig, &t), ZT_OK, "", "a second trainer");
  expect(zt_trainer_run(t), ZT_ERR_CONFIG, "data.train", "a run without data.train");
  expect(zt_trainer_step(t, tokens, targets, B, T, &r), ZT_ERR_FAILED, "failed earlier", "a step after a failed run");
  expect(zt_trainer_destroy(t), ZT_OK, "", "destroy a failed trainer");
  setenv("ZT_POISON_GRADS", "0:2", 1);  /* a testing aid: this rank's gradients at step 2 become NaN */
  expect(zt_trainer_create_local(kConfig, &t), ZT_OK, "", "a third trainer");
  unsetenv("ZT_POISON_GRADS");
  expect(zt_trainer_step(t, tokens, targets, B, T, &r), ZT_OK, "", "step 1 of the third trainer");
  expect(zt_trainer_step(t, tokens, targets, B, T, &r), ZT_ERR_NONFINITE, "step 2", "a non-finite step");
  expect(zt_trainer_step(t, tokens, targets, B, T, &r), ZT_ERR_FAILED, "gradient norm", "a step after a fatal error");
  const char* json = NULL;
  expect(zt_trainer_metrics(t, &json), ZT_OK, "", "metrics after a fatal error");
  if (!json || !strstr(json, "\"step\":1")) { printf("FAIL: the last metrics are not step 1's: %s\n", json ? json : "(null)"); ++failures; }
  expect(zt_trainer_destroy(t), ZT_OK, "", "destroy after a fatal error");
}

int main(int argc, char** argv) {
  int provided = 0, rank = 0, size = 1;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  one_process(argc > 1 ? argv[1] : "/tmp", rank);
  if (size > 1) {
    /* Rank 1 asks for another learning rate: every rank returns the error, naming the setting. */
    char config[1024];
    snprintf(config, sizeof config, "{\"optimizer\": {\"params\": {\"lr\": %s}},%s", rank == 1 ? "0.5" : "0.25", kConfig + 1);
    zt_trainer* t = NULL;
    expect(zt_trainer_create(config, MPI_COMM_WORLD, &t), ZT_ERR_CONFIG, "optimizer", "ranks that disagree on the config");
    if (t) { printf("FAIL: a failed create left a trainer\n"); ++failures; }
    expect(zt_trainer_create(kConfig, MPI_COMM_WORLD, &t), ZT_OK, "", "ranks that agree, after");
    expect(zt_trainer_destroy(t), ZT_OK, "", "destroy the agreed trainer");
  }
  printf("rank %d: %d failed checks\n", rank, failures);
  MPI_Finalize();
  return failures ? 1 : 0;
}
