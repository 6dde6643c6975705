# Configs and command lines that are wrong: each names the key or flag.
tiny_config "$dir/tiny.json"
probe cfg_unknown_key 1 20 "config: model.n_layers: unknown key" -- "$ztrain" train --config "$dir/tiny.json" --set model.n_layers=2
probe cfg_not_json 1 20 "is not valid JSON" -- "$ztrain" train --config /usr/share/common-licenses/GPL-3
probe cfg_missing 1 20 "cannot read '$dir/absent.json'" -- "$ztrain" train --config "$dir/absent.json"
probe cli_steps_word 2 20 "--steps expects an integer, got 'ten'" -- "$ztrain" train --config "$dir/tiny.json" --steps ten
probe cfg_threads_huge 1 20 "config: train.threads: must be in \[0, 1024\], got 100000" -- "$ztrain" train --config "$dir/tiny.json" --set train.threads=100000
probe cfg_timeout_huge 1 20 "config: train.comm_timeout_s: must be in \[0, 1e7\] seconds" -- "$ztrain" train --config "$dir/tiny.json" --set train.comm_timeout_s=1e300
probe cfg_val_without_data 1 20 "config: train.val_interval: 3 asks for validation, but data.val names no validation shards" -- \
  "$ztrain" train --config "$dir/tiny.json" --set data.format=llmc --set train.val_interval=3
# More threads than the host has cores: it runs, and says why it will be slow.
cores=$(nproc)
probe cfg_threads_oversubscribed 0 60 "warning: train.threads $((cores + 1)) x 1 ranks on this host exceed its $cores cores" -- \
  "$ztrain" train --config "$dir/tiny.json" --steps 1 --set train.threads=$((cores + 1))
# A dimension the architecture lacks is refused by name, not ignored (the model specs say which).
probe cfg_qwen3_bias 1 20 'config: model.attention_bias: does not apply to Qwen3 \(model.arch "qwen3"\)' -- \
  "$ztrain" train --config "$dir/tiny.json" --set model.arch=qwen3 --set model.attention_bias=true
probe cfg_llama_window 1 20 'config: model.sliding_window: does not apply to the Llama family \(model.arch "llama"\)' -- \
  "$ztrain" train --config "$dir/tiny.json" --set model.arch=llama --set model.sliding_window=4
probe cfg_gemma_pad_negative 1 20 'config: model.pad_token_id: must be >= -1, got -5' -- \
  "$ztrain" train --config "$dir/tiny.json" --set model.arch=gemma3 --set model.pad_token_id=-5
