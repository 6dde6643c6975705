/* Bad use of the embedding API ends in an error status with a message, never a crash: the host
 * survives and destroys the trainer cleanly. Every rank runs the one-process checks on trainers of
 * its own (zt_trainer_create_local); with several ranks, a communicator whose ranks disagree on the
 * config follows. Prints each failed check; exits 1 if any failed.
 * A trainer called from a second thread while a call is in it answers "in use" and survives; one
 * on MPI_COMM_WORLD is destroyed after MPI_Finalize without calling MPI.
 *   mpirun -np 2 bad_use SCRATCH_DIR
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <mpi.h>
#include <math.h>
#include <pthread.h>
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

/* A second thread's calls while the first is inside zt_trainer_save: its log callback (run inside
 * the save) hands over to the main thread and waits until that one has made its calls. */
struct handover {
  pthread_mutex_t m;
  pthread_cond_t cv;
  int inside, done;
  zt_trainer* t;
  zt_status saved;
  char dir[4096];
};
static void hold_inside(void* user, const char* line) {
  (void)line;
  struct handover* h = user;
  pthread_mutex_lock(&h->m);
  h->inside = 1;
  pthread_cond_broadcast(&h->cv);
  while (!h->done) pthread_cond_wait(&h->cv, &h->m);
  pthread_mutex_unlock(&h->m);
}
static void* save_in_thread(void* user) {
  struct handover* h = user;
  h->saved = zt_trainer_save(h->t, h->dir);
  return NULL;
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
  /* A batch without one target (every one -1): the step is skipped, its loss NaN, never 0. */
  int32_t none[B * T];
  for (int i = 0; i < B * T; ++i) none[i] = -1;
  const int32_t before = r.step;
  expect(zt_trainer_step(t, tokens, none, B, T, &r), ZT_OK, "", "a step without targets");
  if (!r.stepped || r.step != before + 1 || !isnan(r.loss)) {
    printf("FAIL: the step without targets: stepped %d step %d loss %g (expected NaN)\n", r.stepped, r.step, r.loss);
    ++failures;
  }
  const char* skipped = NULL;
  expect(zt_trainer_metrics(t, &skipped), ZT_OK, "", "metrics of the step without targets");
  if (!skipped || !strstr(skipped, "\"no_targets\":true") || !strstr(skipped, "\"loss\":null")) {
    printf("FAIL: the step without targets' metrics: %s\n", skipped ? skipped : "(null)");
    ++failures;
  }
  double eval_loss = 0;
  expect(zt_trainer_eval(t, tokens, none, B, T, &eval_loss), ZT_OK, "", "an evaluation without targets");
  if (!isnan(eval_loss)) { printf("FAIL: an evaluation without targets gave %g, not NaN\n", eval_loss); ++failures; }
  expect(zt_trainer_step(t, tokens, targets, B, T, &r), ZT_OK, "", "a step after the one without targets");
  if (!isfinite(r.loss)) { printf("FAIL: the step after the one without targets: loss %g\n", r.loss); ++failures; }
  /* Another thread's call while a save is inside its log callback: "in use", nothing changed. */
  struct handover h = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, t, ZT_ERR_RUNTIME, ""};
  snprintf(h.dir, sizeof h.dir, "%s/threads_%d", scratch, rank);
  expect(zt_trainer_set_log(t, hold_inside, &h), ZT_OK, "", "a log callback that waits");
  pthread_t other;
  pthread_create(&other, NULL, save_in_thread, &h);
  pthread_mutex_lock(&h.m);
  while (!h.inside) pthread_cond_wait(&h.cv, &h.m);
  pthread_mutex_unlock(&h.m);
  const int32_t step_before = r.step;
  expect(zt_trainer_step(t, tokens, targets, B, T, &r), ZT_ERR_ARGUMENT, "in use by another thread", "a step while another thread saves");
  expect(zt_trainer_metrics(t, &skipped), ZT_ERR_ARGUMENT, "in use by another thread", "metrics while another thread saves");
  expect(zt_trainer_destroy(t), ZT_ERR_ARGUMENT, "in use by another thread", "destroy while another thread saves");
  pthread_mutex_lock(&h.m);
  h.done = 1;
  pthread_cond_broadcast(&h.cv);
  pthread_mutex_unlock(&h.m);
  pthread_join(other, NULL);
  if (h.saved != ZT_OK) { printf("FAIL: the save in the other thread: %s\n", zt_status_name(h.saved)); ++failures; }
  expect(zt_trainer_set_log(t, NULL, NULL), ZT_OK, "", "the trainer usable after the calls it refused");
  expect(zt_trainer_step(t, tokens, targets, B, T, &r), ZT_OK, "", "a step after the calls it refused");
  if (r.step != step_before + 1) { printf("FAIL: the refused step counted: step %d after %d\n", r.step, step_before); ++failures; }
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
  /* A trainer on MPI_COMM_WORLD outlives MPI: destroyed after MPI_Finalize, it calls no MPI. */
  zt_trainer* outlives = NULL;
  expect(zt_trainer_create(kConfig, MPI_COMM_WORLD, &outlives), ZT_OK, "", "a trainer destroyed after MPI_Finalize");
  MPI_Finalize();
  expect(zt_trainer_destroy(outlives), ZT_OK, "", "destroy after MPI_Finalize");
  printf("rank %d: %d failed checks\n", rank, failures);
  return failures ? 1 : 0;
}
