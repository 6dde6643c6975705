/* ztrain's embedding API: train or fine-tune a model inside a program that runs under MPI already
 * (a simulation, a data pipeline; C, C++, Fortran through iso_c_binding, Python through ctypes), on
 * batches it makes in memory, over a communicator of its choosing.
 *
 * Plain C, stable: opaque handles, and a zt_status from every call. Nothing throws across this
 * boundary and nothing ends the process: an error returns its status, and zt_last_error() says
 * what went wrong (a message of the calling thread's, kept until its next call into ztrain).
 *
 * Collective calls: every rank of the trainer's communicator makes them, in the same order, with
 * the same kind of arguments (its own batch). An error the ranks can all see (a bad config, a bad
 * batch on any rank, a checkpoint that cannot be written) returns on every rank alike. An error of
 * one rank alone that leaves the others inside a collective ends theirs with ZT_ERR_COMM after
 * train.comm_timeout_s. After a fatal error (ZT_ERR_COMM, ZT_ERR_NONFINITE, ZT_ERR_RUNTIME, a
 * failed load) the trainer answers every call but zt_trainer_destroy with ZT_ERR_FAILED.
 *
 * The config is the JSON of `ztrain train --config` (a file's path, or the JSON text itself when
 * it starts with '{'); data.train may be left out when the caller feeds every batch.
 *
 * Process-wide effects: a trainer sets the OpenMP thread count (train.threads; 0 shares the host's
 * cores among the ranks on it), and with MPI needs MPI_THREAD_MULTIPLE.
 *
 * Threads: a trainer takes one call at a time. A call on a trainer that another thread's call is
 * still in (or made from inside its log callback) returns ZT_ERR_ARGUMENT, "in use by another
 * thread", and changes nothing, zt_trainer_destroy included; the trainer stays usable. Different
 * trainers may be called from different threads. zt_last_error() is the calling thread's.
 * zt_trainer_destroy may follow MPI_Finalize: it then frees the trainer without calling MPI.
 */
#ifndef ZTRAIN_ZTRAIN_H
#define ZTRAIN_ZTRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "ztrain/ztrain_features.h" /* ZT_WITH_MPI: this library was built with MPI */

#if ZT_WITH_MPI
#include <mpi.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The API's version: raised by any change to a declaration or a documented behaviour here.
 * zt_api_version() says which the library was built with. */
#define ZT_API_VERSION 2  /* 2: one call at a time per trainer; a step without targets skipped, loss NaN */

#if defined(__GNUC__)
#define ZT_API __attribute__((visibility("default")))
#else
#define ZT_API
#endif

typedef enum zt_status {
  ZT_OK = 0,
  ZT_ERR_ARGUMENT = 1,   /* a null or unknown handle, a batch of the wrong shape, a token outside the vocabulary */
  ZT_ERR_CONFIG = 2,     /* the config: unreadable, invalid, or different on some rank */
  ZT_ERR_DATA = 3,       /* the configured data files */
  ZT_ERR_CHECKPOINT = 4, /* a checkpoint or model file that cannot be written or read */
  ZT_ERR_COMM = 5,       /* MPI: not initialized, too low a thread level, a collective that failed or timed out */
  ZT_ERR_NONFINITE = 6,  /* a step's loss or gradient norm was inf or NaN (train.skip_nonfinite_steps) */
  ZT_ERR_MEMORY = 7,     /* an allocation failed */
  ZT_ERR_FAILED = 8,     /* the trainer failed earlier: destroy it */
  ZT_ERR_UNSUPPORTED = 9, /* not in this build (e.g. a communicator without MPI) */
  ZT_ERR_RUNTIME = 10    /* anything else */
} zt_status;

typedef struct zt_trainer zt_trainer;

/* What one zt_trainer_step call did. */
typedef struct zt_step_result {
  int32_t stepped;     /* 1: the optimizer stepped (the last micro-batch of an accumulation), else 0 */
  int32_t step;        /* optimizer steps taken so far (a loaded checkpoint's included) */
  double loss;         /* the step's loss, the mean over its micro-batches and ranks; NaN until it stepped,
                        * and NaN for a step whose global batch held no target (every one -1): that step
                        * is skipped, nothing is updated */
  double lr;           /* the step's learning rate */
  double grad_norm;    /* before clipping */
  double ms;           /* the step's time, from its first micro-batch's forward */
  double tokens_per_s; /* over all ranks */
} zt_step_result;

/* Called with each line a trainer logs (the run's banner, progress, validation, saves); `user` as
 * given to zt_trainer_set_log. On rank 0 only. */
typedef void (*zt_log_fn)(void* user, const char* line);

ZT_API int zt_api_version(void);
ZT_API const char* zt_version(void);
/* What went wrong in the calling thread's last call into ztrain; "" when it succeeded. */
ZT_API const char* zt_last_error(void);
ZT_API const char* zt_status_name(zt_status status);

/* Collective over `comm`: a trainer on a duplicate of it (any sub-communicator of the host's).
 * MPI_COMM_NULL: one process of its own, without MPI. On failure *out is NULL. */
#if ZT_WITH_MPI
ZT_API zt_status zt_trainer_create(const char* config, MPI_Comm comm, zt_trainer** out);
#endif
/* The same with a Fortran communicator handle (MPI_Comm_c2f; mpi4py's comm.py2f()). */
ZT_API zt_status zt_trainer_create_f(const char* config, int32_t fortran_comm, zt_trainer** out);
/* One process, without MPI (it need not be initialized). */
ZT_API zt_status zt_trainer_create_local(const char* config, zt_trainer** out);
/* Collective (alone after MPI_Finalize: then nothing of MPI is called). Frees everything the trainer
 * holds (an optimizer update still running finishes first); once the last trainer is gone, the
 * memory kept for reuse goes back to the system too. NULL is a no-op; an unknown handle, or one
 * another thread's call is in, is ZT_ERR_ARGUMENT. */
ZT_API zt_status zt_trainer_destroy(zt_trainer* t);

/* Collective. One micro-batch of train_micro_batch_size_per_gpu (B) rows of data.seq_len (T)
 * tokens, row-major, and its targets (the next tokens; -1 leaves a position out of the loss). Every
 * gradient_accumulation_steps-th call steps the optimizer; the calls before it only keep their
 * batch (the step computes over them all, so its numbers equal `ztrain train`'s on the same
 * batches). `result` may be NULL. */
ZT_API zt_status zt_trainer_step(zt_trainer* t, const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                                 zt_step_result* result);
/* Collective. One optimizer step over the next batches of the config's data.train. */
ZT_API zt_status zt_trainer_step_data(zt_trainer* t, zt_step_result* result);
/* Collective. The whole configured run, as `ztrain train` does it: train.steps steps from
 * data.train, validation, checkpoints, train.save_model; its lines through the log callback. */
ZT_API zt_status zt_trainer_run(zt_trainer* t);
/* Collective. The loss of one micro-batch (shaped as zt_trainer_step's) over the ranks, without
 * gradients; tokens NULL: the mean over the configured validation data (train.val_batches). NaN
 * when no rank's batch holds a target (every one -1). */
ZT_API zt_status zt_trainer_eval(zt_trainer* t, const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                                 double* loss);
/* Collective. A checkpoint of this point as dir/step_<step> (NULL: checkpoint.dir), the layout
 * `ztrain train --resume` and zt_trainer_load read. A failed save leaves the trainer usable. */
ZT_API zt_status zt_trainer_save(zt_trainer* t, const char* dir);
/* Collective. Continues from a checkpoint: a step folder, or a folder of them (its latest). */
ZT_API zt_status zt_trainer_load(zt_trainer* t, const char* dir);
/* Collective. The model as a file: format "safetensors" (Hugging Face's names) or "llmc" (GPT-2).
 * A LoRA run writes the merged model. */
ZT_API zt_status zt_trainer_export(zt_trainer* t, const char* format, const char* path);
/* The last step's metrics as one JSON object, the fields of a train.metrics line (this rank's
 * times, memory and bytes sent); "{}" before the first step. Valid until the next call on t. */
ZT_API zt_status zt_trainer_metrics(zt_trainer* t, const char** json);
/* From the next step on, the learning rate is lr (the configured scheduler no longer applies). */
ZT_API zt_status zt_trainer_set_lr(zt_trainer* t, double lr);
/* Where rank 0's lines go: fn(user, line); NULL: nowhere. By default, standard output. */
ZT_API zt_status zt_trainer_set_log(zt_trainer* t, zt_log_fn fn, void* user);

#ifdef __cplusplus
}
#endif

#endif /* ZTRAIN_ZTRAIN_H */
