#include "runtime/cli/tokenize.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

#include "files/json_text.hpp"
#include "runtime/data/data.hpp"
#include "runtime/data/token_shards.hpp"
#include "runtime/file_io.hpp"
#include "runtime/text/tokenizer.hpp"

namespace zt {

namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& msg) { throw DataError("tokenize: " + msg); }

// A document: bytes [begin, end) of a file. A .jsonl file holds one document per line, its "text".
struct Doc {
  std::string path;
  int64_t begin, end;
  bool jsonl;
  bool val;
};

// Bytes [begin, end) of a file, read with pread (a short read means the file shrank).
std::string read_range(const std::string& path, int64_t begin, int64_t end) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path + ": cannot open: " + std::strerror(errno));
  std::string out(size_t(end - begin), '\0');
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::pread(fd, out.data() + got, out.size() - got, begin + int64_t(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = n < 0 ? std::strerror(errno) : "the file ended early (did it change?)";
      ::close(fd);
      fail(path + ": read failed at byte " + std::to_string(begin + int64_t(got)) + ": " + why);
    }
    got += size_t(n);
  }
  ::close(fd);
  return out;
}

// Where a chunk may end: just after a line break that an ASCII letter follows (any line break in
// .jsonl). [Note: tokenizing a corpus]
bool chunk_boundary(const std::string& buf, size_t i, bool jsonl) {
  if (buf[i - 1] != '\n') return false;
  if (jsonl) return true;
  const char c = buf[i];
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// The first boundary at or after `pos` in doc, or doc.end.
int64_t boundary_from(const Doc& doc, int64_t pos) {
  if (pos <= doc.begin) return doc.begin;
  constexpr int64_t kBlock = 1 << 16;
  for (int64_t at = pos; at < doc.end;) {
    const int64_t stop = std::min(doc.end, at + kBlock);
    const std::string buf = read_range(doc.path, at - 1, stop);  // byte q is buf[q - at + 1]
    for (int64_t q = at; q < stop; ++q)
      if (chunk_boundary(buf, size_t(q - at + 1), doc.jsonl)) return q;
    at = stop;
  }
  return doc.end;
}

// One unit of work: the chunk of doc starting at the boundary from `from` up to the one from `to`.
struct Item {
  size_t doc;
  int64_t from, to;  // nominal; the boundaries at or after them are the chunk's real ends
};

std::vector<int32_t> encode_item(const Doc& doc, const Item& item, TokenEncoder& enc, int32_t eot) {
  const int64_t begin = boundary_from(doc, item.from), end = boundary_from(doc, item.to);
  std::vector<int32_t> out;
  if (begin >= end) return out;
  const std::string text = read_range(doc.path, begin, end);
  if (!doc.jsonl) {
    if (begin == doc.begin) out.push_back(eot);
    enc.encode(text, out);
    return out;
  }
  for (size_t line = 0; line < text.size();) {
    const size_t nl = std::min(text.find('\n', line), text.size());
    const std::string_view s(text.data() + line, nl - line);
    if (s.find_first_not_of(" \t\r") != std::string_view::npos) {
      const auto j = parse_json(s).value;  // [Note: JSON from files] in files/json_text.hpp
      if (j.is_discarded() || !j.is_object() || !j.contains("text") || !j["text"].is_string())
        fail(doc.path + ": the line at byte " + std::to_string(begin + int64_t(line)) +
             " is not a JSON object with a string \"text\"");
      out.push_back(eot);
      enc.encode(j["text"].get_ref<const std::string&>(), out);
    }
    line = nl + 1;
  }
  return out;
}

std::vector<Doc> documents(const TokenizeOptions& opt, int64_t& total) {
  std::vector<Doc> docs;
  total = 0;
  for (const std::string& path : list_files(opt.inputs)) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) fail(path + ": cannot stat: " + std::strerror(errno));
    if (st.st_size == 0) continue;
    docs.push_back({path, 0, st.st_size, fs::path(path).extension() == ".jsonl", false});
    total += st.st_size;
  }
  if (docs.empty()) fail("the inputs hold no bytes");
  if (opt.val_fraction <= 0) return docs;
  // The validation split: the first val_fraction of the bytes, cut at the next line end.
  int64_t cut = static_cast<int64_t>(opt.val_fraction * double(total)), seen = 0;
  std::vector<Doc> out;
  for (Doc& d : docs) {
    const int64_t size = d.end - d.begin;
    if (cut > seen && cut < seen + size) {  // the cut falls inside: at the line end from there
      const std::string rest = read_range(d.path, cut - seen, d.end);
      const size_t nl = rest.find('\n');
      const int64_t at = nl == std::string::npos ? d.end : cut - seen + int64_t(nl) + 1;
      out.push_back({d.path, d.begin, at, d.jsonl, true});
      if (at < d.end) out.push_back({d.path, at, d.end, d.jsonl, false});
    } else {
      d.val = seen < cut;
      out.push_back(d);
    }
    seen += size;
  }
  return out;
}

void check_out_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("--out '" + dir + "': cannot create the folder: " + ec.message());
  remove_stale_temporaries(dir);  // a killed run's unpublished shards
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if ((name.starts_with("train_") || name.starts_with("val_")) && name.ends_with(".bin"))
      fail("--out '" + dir + "' already holds token shards (" + name +
           "); a loader would read them with the new ones: remove them or choose another folder");
  }
  if (ec) fail("--out '" + dir + "': cannot list the folder: " + ec.message());
}

}  // namespace

TokenizeReport tokenize_corpus(const Tokenizer& tok, const TokenizeOptions& opt,
                               const std::function<void(int64_t, int64_t, double)>& progress) {
  if (!(opt.val_fraction >= 0.0 && opt.val_fraction < 1.0))
    throw std::invalid_argument("--val-fraction must be in [0, 1), got " + std::to_string(opt.val_fraction));
  if (opt.chunk_bytes < 1 || opt.shard_tokens < 1) throw std::invalid_argument("chunk and shard sizes must be positive");
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  const int32_t eot = tok.end_of_text();
  TokenizeReport report;
  const std::vector<Doc> docs = documents(opt, report.bytes);
  report.documents = int64_t(docs.size());
  check_out_dir(opt.out);

  std::vector<Item> items;
  // A SentencePiece-style tokenizer may merge across a line start: its documents are not cut.
  for (size_t d = 0; d < docs.size(); ++d) {
    const int64_t step = tok.cuts_at_line_starts() || docs[d].jsonl ? opt.chunk_bytes : docs[d].end - docs[d].begin;
    for (int64_t at = docs[d].begin; at < docs[d].end; at += step) items.push_back({d, at, std::min(docs[d].end, at + step)});
  }

  const ShardFormat format = shard_format_for(tok.vocab_size());
  report.format_version = format.version;
  ShardWriter train(opt.out, "train", format, opt.shard_tokens), val(opt.out, "val", format, opt.shard_tokens);

  report.threads = opt.threads > 0 ? opt.threads : std::max(1, int(std::thread::hardware_concurrency()));
  const size_t window = size_t(4 * report.threads);  // chunks encoded ahead of the writer
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::optional<std::vector<int32_t>>> done(items.size());
  size_t next = 0, written = 0;
  std::exception_ptr error;

  auto worker = [&] {
    TokenEncoder enc(tok);
    for (;;) {
      size_t i;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return error || next >= items.size() || next < written + window; });
        if (error || next >= items.size()) return;
        i = next++;
      }
      try {
        auto ids = encode_item(docs[items[i].doc], items[i], enc, eot);
        std::lock_guard lock(mu);
        done[i] = std::move(ids);
      } catch (...) {
        std::lock_guard lock(mu);
        if (!error) error = std::current_exception();
      }
      cv.notify_all();
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < report.threads; ++t) pool.emplace_back(worker);
  int64_t bytes_done = 0;
  double last = 0;
  try {
    for (size_t i = 0; i < items.size(); ++i) {
      std::vector<int32_t> ids;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return error || done[i].has_value(); });
        if (error) break;
        ids = std::move(*done[i]);
        done[i].reset();
        written = i + 1;  // the workers' window moves on (read under the lock)
      }
      cv.notify_all();
      const Doc& doc = docs[items[i].doc];
      (doc.val ? val : train).write(ids);
      (doc.val ? report.val_tokens : report.train_tokens) += int64_t(ids.size());
      bytes_done += items[i].to - items[i].from;
      if (progress && seconds() - last >= 0.5) progress(bytes_done, report.bytes, last = seconds());
    }
  } catch (...) {
    std::lock_guard lock(mu);
    if (!error) error = std::current_exception();
  }
  {
    std::lock_guard lock(mu);
    if (!error && written < items.size()) error = std::make_exception_ptr(std::logic_error("tokenize: stopped early"));
    next = items.size();  // the workers stop taking chunks
  }
  cv.notify_all();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  train.finish();
  val.finish();
  val.publish();  // [Note: a corpus appears whole] in runtime/data/token_shards.hpp
  train.publish();
  report.files = val.files();
  report.files.insert(report.files.end(), train.files().begin(), train.files().end());
  report.seconds = seconds();
  if (progress) progress(bytes_done, report.bytes, report.seconds);
  return report;
}

}  // namespace zt
