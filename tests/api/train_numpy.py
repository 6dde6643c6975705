#!/usr/bin/python3
"""The embedding API from Python through ctypes (no compiled extension): one process trains from
NumPy arrays. The batches are read from an llm.c token shard in the order `ztrain train` reads it
on one rank, so the losses can be set beside the CLI's; then evaluation, the metrics, a save and a
load back, and a learning rate set from Python.

    train_numpy.py LIBZTRAIN CONFIG SHARD STEPS CHECKPOINT_DIR
Prints "step N loss X" per optimizer step, then "eval X" (of the first batch), "metrics {...}",
"lr X at step N" and "moved eval X" after a step at a learning rate set from Python, and "reloaded
eval X" once the checkpoint saved before it is loaded back.
"""
import ctypes
import json
import sys

import numpy as np


class StepResult(ctypes.Structure):
    _fields_ = [("stepped", ctypes.c_int32), ("step", ctypes.c_int32), ("loss", ctypes.c_double),
                ("lr", ctypes.c_double), ("grad_norm", ctypes.c_double), ("ms", ctypes.c_double),
                ("tokens_per_s", ctypes.c_double)]


def load(path):
    lib = ctypes.CDLL(path)
    ptr = ctypes.POINTER(ctypes.c_int32)
    lib.zt_last_error.restype = ctypes.c_char_p
    lib.zt_status_name.restype = ctypes.c_char_p
    lib.zt_trainer_create_local.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.zt_trainer_step.argtypes = [ctypes.c_void_p, ptr, ptr, ctypes.c_int64, ctypes.c_int64,
                                    ctypes.POINTER(StepResult)]
    lib.zt_trainer_eval.argtypes = [ctypes.c_void_p, ptr, ptr, ctypes.c_int64, ctypes.c_int64,
                                    ctypes.POINTER(ctypes.c_double)]
    lib.zt_trainer_metrics.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p)]
    lib.zt_trainer_set_lr.argtypes = [ctypes.c_void_p, ctypes.c_double]
    for name in ("zt_trainer_save", "zt_trainer_load"):
        getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.zt_trainer_destroy.argtypes = [ctypes.c_void_p]
    return lib


def main():
    lib_path, config_path, shard_path, steps, checkpoint = sys.argv[1:6]
    lib = load(lib_path)

    def ok(status, what):
        if status != 0:
            sys.exit(f"{what}: {lib.zt_status_name(status).decode()}: {lib.zt_last_error().decode()}")

    config = json.load(open(config_path))
    B, T = config["train_micro_batch_size_per_gpu"], config["data"]["seq_len"]
    accum = config.get("gradient_accumulation_steps", 1)
    shard = np.fromfile(shard_path, dtype=np.uint16, offset=1024).astype(np.int32)
    slices = (len(shard) - 1) // (B * T)

    def batch(k):
        pos = (k % slices) * B * T
        window = shard[pos:pos + B * T + 1]
        return np.ascontiguousarray(window[:-1]).reshape(B, T), np.ascontiguousarray(window[1:]).reshape(B, T)

    def as_ptr(a):
        return a.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))

    t = ctypes.c_void_p()
    # The config as JSON text: a path would do as well.
    ok(lib.zt_trainer_create_local(json.dumps(config).encode(), ctypes.byref(t)), "zt_trainer_create_local")
    result = StepResult()
    for k in range(int(steps) * accum):
        tokens, targets = batch(k)
        ok(lib.zt_trainer_step(t, as_ptr(tokens), as_ptr(targets), B, T, ctypes.byref(result)), "zt_trainer_step")
        if result.stepped:
            print(f"step {result.step} loss {result.loss!r}")
    loss = ctypes.c_double()
    tokens, targets = batch(0)
    ok(lib.zt_trainer_eval(t, as_ptr(tokens), as_ptr(targets), B, T, ctypes.byref(loss)), "zt_trainer_eval")
    print(f"eval {loss.value!r}")
    metrics = ctypes.c_char_p()
    ok(lib.zt_trainer_metrics(t, ctypes.byref(metrics)), "zt_trainer_metrics")
    print("metrics " + metrics.value.decode())
    ok(lib.zt_trainer_save(t, checkpoint.encode()), "zt_trainer_save")
    ok(lib.zt_trainer_set_lr(t, 0.05), "zt_trainer_set_lr")
    for k in range(accum):
        tokens, targets = batch(10_000 + k)
        ok(lib.zt_trainer_step(t, as_ptr(tokens), as_ptr(targets), B, T, ctypes.byref(result)), "zt_trainer_step")
    print(f"lr {result.lr!r} at step {result.step}")
    tokens, targets = batch(0)
    ok(lib.zt_trainer_eval(t, as_ptr(tokens), as_ptr(targets), B, T, ctypes.byref(loss)), "zt_trainer_eval")
    print(f"moved eval {loss.value!r}")
    ok(lib.zt_trainer_load(t, checkpoint.encode()), "zt_trainer_load")
    ok(lib.zt_trainer_eval(t, as_ptr(tokens), as_ptr(targets), B, T, ctypes.byref(loss)), "zt_trainer_eval")
    print(f"reloaded eval {loss.value!r}")
    ok(lib.zt_trainer_destroy(t), "zt_trainer_destroy")


if __name__ == "__main__":
    main()
