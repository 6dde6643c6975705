# Training data that is missing, empty, too small, unreadable or not what the format says: each
# ends before the first step with the file named.
tiny_config "$dir/data.json"
mkdir -p "$dir/data/empty_folder"
: > "$dir/data/empty.txt"
head -c 50 /usr/share/common-licenses/GPL-3 > "$dir/data/small.txt"
head -c 2000 /dev/urandom > "$dir/data/junk_train_000.bin"
/usr/bin/python3 - "$dir/data" <<'PY'
import struct, sys
d = sys.argv[1]
def shard(name, version, count, tokens):
    with open(f"{d}/{name}", "wb") as f:
        f.write(struct.pack("<256i", 20240520, version, count, *([0] * 253)))
        f.write(struct.pack(f"<{len(tokens)}H", *tokens))
shard("trunc_train_000.bin", 1, 100, [1] * 10)
shard("v9_train_000.bin", 1 + 8, 3000, [6] * 3000)
shard("neg_train_000.bin", 1, -5, [])
shard("tiny_train_000.bin", 1, 20, [1] * 20)
shard("good_train_000.bin", 1, 3000, [i % 256 for i in range(3000)])
PY
data_run() { "$ztrain" train --config "$dir/data.json" "$@"; }
probe data_no_match 1 20 "data: no file matches '$dir/data/absent\*'" -- data_run --set data.train="$dir/data/absent*"
probe data_empty_file 1 20 "data: '$dir/data/empty.txt' holds no bytes" -- data_run --set data.train="$dir/data/empty.txt"
probe data_empty_folder 1 20 "holds no bytes" -- data_run --set data.train="$dir/data/empty_folder"
probe data_too_small 1 20 "too small for one global batch" -- data_run --set data.train="$dir/data/small.txt"
probe data_device 1 20 "/dev/zero: not a regular file or folder" -- data_run --set data.train=/dev/zero
probe data_empty_entry 1 20 "empty entry in file list" -- data_run --set data.train="$dir/data/small.txt::/usr/share/common-licenses"
llmc_run() { data_run --set data.format=llmc --set model.vocab_size=256 "$@"; }
probe data_bad_magic 1 20 "junk_train_000.bin: bad magic .* \(not an llm.c token shard\)" -- llmc_run --set data.train="$dir/data/junk_train_*.bin"
probe data_truncated_shard 1 20 "trunc_train_000.bin: header says 100 tokens.*truncated" -- llmc_run --set data.train="$dir/data/trunc_train_*.bin"
probe data_shard_version 1 20 "v9_train_000.bin: unsupported version 9" -- llmc_run --set data.train="$dir/data/v9_train_*.bin"
probe data_negative_count 1 20 "neg_train_000.bin: negative token count" -- llmc_run --set data.train="$dir/data/neg_train_*.bin"
probe data_shard_too_small 1 20 "tiny_train_000.bin: 20 tokens, too small for one global batch" -- llmc_run --set data.train="$dir/data/tiny_train_*.bin"
if [ "$(id -u)" -ne 0 ]; then  # root reads anything
  cp "$dir/data/small.txt" "$dir/data/locked.txt" && chmod 000 "$dir/data/locked.txt"
  probe data_unreadable 1 20 "locked.txt: cannot open: Permission denied" -- data_run --set data.train="$dir/data/locked.txt"
fi
# Two ranks with the same settings whose data is there for one only (a relative glob, resolved in
# each rank's own folder, as on hosts where a mount is missing): the job ends naming the rank, the
# pattern and the folder it was looked for in.
mkdir -p "$dir/data/here/shards" "$dir/data/there"
cp /usr/share/common-licenses/GPL-3 "$dir/data/here/shards/"
probe data_one_rank_bad 1 40 "\[rank 1\] error: data: no file matches 'shards/\*' in '$dir/data/there'" -- "${mp[@]}" \
  -np 1 -wdir "$dir/data/here" "$ztrain" train --config "$dir/data.json" --set data.train='shards/*' : \
  -np 1 -wdir "$dir/data/there" "$ztrain" train --config "$dir/data.json" --set data.train='shards/*'
# A corpus far larger than a run needs (a sparse 3 GiB file: gigabytes of zeros that cost no disk)
# trains with the memory of a small one: batches are read where they lie, never loaded whole.
truncate -s 3G "$dir/data/huge.txt"
peak_rss_kb() {  # peak resident memory of the command, in KiB, as the last line
  /usr/bin/python3 -c 'import resource, subprocess, sys
rc = subprocess.run(sys.argv[1:]).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(rc)' "$@"
}
probe data_huge_corpus 0 60 "step +2/2" -- peak_rss_kb "$ztrain" train --config "$dir/data.json" --steps 2 --set data.train="$dir/data/huge.txt"
rss=$(tail -n 1 "$dir/data_huge_corpus.out")
[ "$rss" -lt 1500000 ] 2> /dev/null || fail "data_huge_corpus: a 3 GiB corpus took $rss KiB of memory (read whole?)"
rm -f "$dir/data/huge.txt"
