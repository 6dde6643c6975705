#!/usr/bin/env bash
# Makes the reference files tests/test_llama_hf.cpp compares ztrain against for the models the test
# machine's transformers (Debian's torch with transformers 4.46) has no class for: Qwen3, Gemma 3. Run once
# with the peers' environment (transformers 5.x, scripts/install-peers.sh) and commit the output:
#   tests/golden/make_goldens.sh
# Each case is tests/ref/llama_hf.py's `golden` output: the model folder transformers saved, the
# batch and the reference (loss, logits, every gradient; or ten AdamW steps' losses).
set -euo pipefail
cd "$(dirname "$0")/../.."
py=$(bash scripts/install-peers.sh | tail -1)
out=tests/golden
for variant in qwen3 qwen3_tied gemma3 gemma3_untied; do
  rm -rf "$out/$variant"
  "$py" tests/ref/llama_hf.py golden "$out/$variant/grads" --variant "$variant" --seed 3 --case grads
  "$py" tests/ref/llama_hf.py golden "$out/$variant/adamw" --variant "$variant" --seed 5 --case adamw --steps 10
done
"$py" -c "import transformers, torch; print('made with transformers', transformers.__version__, 'torch', torch.__version__)" \
  > "$out/VERSIONS"
