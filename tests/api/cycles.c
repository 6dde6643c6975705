/* What the library holds after zt_trainer_destroy: CYCLES rounds of create, STEPS steps, destroy in
 * one process. It prints the resident set size after round WARM (OpenMP's threads are up and the
 * allocator's arenas settle in the first rounds: a step of a megabyte or so comes and goes with
 * glibc's heuristics) and after the last; it fails when the last is more than LIMIT_KIB above it.
 * A trainer of this model holds a few MiB, so one kept each round passes the default limit within
 * a few rounds; LeakSanitizer's check at exit (the sanitizer pass runs this test with leak checks
 * on) finds smaller leaks exactly. Under AddressSanitizer the RSS is its quarantine's and is not
 * checked.
 *   api_cycles [CYCLES [STEPS [WARM [LIMIT_KIB]]]]   (defaults 60 3 20 4096)
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <ztrain/ztrain.h>

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

static long rss_kib(void) {
  long pages = 0, resident = 0;
  FILE* f = fopen("/proc/self/statm", "r");
  if (!f || fscanf(f, "%ld %ld", &pages, &resident) != 2) return -1;
  fclose(f);
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

int main(int argc, char** argv) {
  const int cycles = argc > 1 ? atoi(argv[1]) : 60, steps = argc > 2 ? atoi(argv[2]) : 3;
  const int warm = argc > 3 ? atoi(argv[3]) : 20;
  const long limit = argc > 4 ? atol(argv[4]) : 4096;
  const char* config =
      "{\"model\": {\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 64, \"max_seq_len\": 32, \"vocab_size\": 256},"
      " \"data\": {\"seq_len\": 32}, \"train\": {\"threads\": 1}, \"train_micro_batch_size_per_gpu\": 4,"
      " \"zero_optimization\": {\"stage\": 3}}";
  int32_t tokens[4 * 32], targets[4 * 32];
  for (int i = 0; i < 4 * 32; ++i) tokens[i] = targets[i] = (i * 13) % 256;
  long at_warm = 0, last = 0;
  for (int c = 1; c <= cycles; ++c) {
    zt_trainer* t = NULL;
    zt_step_result r;
    if (zt_trainer_create_local(config, &t) != ZT_OK) {
      fprintf(stderr, "api_cycles: round %d: %s\n", c, zt_last_error());
      return 1;
    }
    for (int s = 0; s < steps; ++s)
      if (zt_trainer_step(t, tokens, targets, 4, 32, &r) != ZT_OK) {
        fprintf(stderr, "api_cycles: round %d, step %d: %s\n", c, s + 1, zt_last_error());
        return 1;
      }
    if (zt_trainer_destroy(t) != ZT_OK) {
      fprintf(stderr, "api_cycles: round %d: destroy: %s\n", c, zt_last_error());
      return 1;
    }
    if (c == warm) at_warm = rss_kib();
    last = rss_kib();
  }
  printf("resident after round %d: %ld KiB; after round %d: %ld KiB (%+ld KiB)%s\n", warm, at_warm, cycles, last,
         last - at_warm, SANITIZED ? "; AddressSanitizer's quarantine: not checked" : "");
  if (!SANITIZED && last - at_warm > limit) {
    printf("FAIL: the library kept %ld KiB over %d rounds of create, step and destroy (limit %ld KiB)\n", last - at_warm,
           cycles - warm, limit);
    return 1;
  }
  return 0;
}
