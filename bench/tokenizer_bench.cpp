// Single-thread encode rate of ztrain's tokenizer on a folder of documents, as
// tests/ref/tokenizer_ref.py's `bench` measures Hugging Face tokenizers: every document encoded
// on its own from memory, one encoder for all (both sides keep their piece cache warm), best of
// three passes. Prints one JSON line. Driver: tokenizer_bench.sh.
//   tokenizer_bench TOKENIZER FILE...
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/text/tokenizer.hpp"
#include "runtime/text/tokenizer_files.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: tokenizer_bench TOKENIZER FILE...\n");
    return 2;
  }
  try {
    const zt::Tokenizer tok = zt::load_tokenizer(argv[1]);
    std::vector<std::string> docs;
    size_t bytes = 0;
    for (int i = 2; i < argc; ++i) {
      std::ifstream in(argv[i], std::ios::binary);
      std::ostringstream s;
      s << in.rdbuf();
      docs.push_back(s.str());
      bytes += docs.back().size();
    }
    zt::TokenEncoder enc(tok);
    std::vector<int32_t> ids;
    double best = 1e30;
    for (int pass = 0; pass < 3; ++pass) {
      ids.clear();
      const auto t0 = std::chrono::steady_clock::now();
      for (const std::string& d : docs) enc.encode(d, ids);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("{\"bytes\": %zu, \"tokens\": %zu, \"seconds\": %.6f, \"mb_per_s\": %.3f}\n", bytes, ids.size(), best,
                double(bytes) / 1e6 / best);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokenizer_bench: %s\n", e.what());
    return 1;
  }
}
