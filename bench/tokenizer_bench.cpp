// Tokenizer throughput: MB/s of Qwen3 encoding (single thread, per CPU second) on English
// prose (license texts under /usr/share) and on code (C++ headers under /usr/include), plus
// decode and streaming-decode speed. Usage: tokenizer_bench [tokenizer.json or dir] [MB per corpus]
// Default tokenizer: ${TANDEM_CACHE:-<repo>/.cache}/tokenizers/qwen3 (the bootstrap fetches it).
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using tandem::Tokenizer;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Concatenates files (sorted, for repeatability) until `bytes` are collected.
std::string corpus(std::vector<fs::path> files, size_t bytes) {
  std::sort(files.begin(), files.end());
  std::string text;
  for (const fs::path& f : files) {
    if (text.size() >= bytes) break;
    text += read_file(f);
    text += "\n";
  }
  text.resize(std::min(text.size(), bytes));
  return text;
}

std::vector<fs::path> find_files(const fs::path& root, bool (*keep)(const fs::path&)) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(
           root, fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it->is_regular_file(ec) && keep(it->path())) out.push_back(it->path());
  }
  return out;
}

// This thread's CPU time: the figures stay meaningful on a machine shared with builds.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Encodes `text` in chunks of `chunk` bytes (a server sees prompts, not one huge string).
size_t encode_chunks(const Tokenizer& tok, const std::string& text, size_t chunk) {
  size_t n = 0;
  for (size_t at = 0; at < text.size(); at += chunk)
    n += tok.encode(std::string_view(text).substr(at, chunk), false).size();
  return n;
}

void bench_corpus(const std::shared_ptr<const Tokenizer>& shared, const std::string& name,
                  const std::string& text) {
  const Tokenizer& tok = *shared;
  double mb = text.size() / 1e6;
  double t0 = cpu_seconds();
  size_t tokens = tok.encode(text, false).size();
  double cold = cpu_seconds() - t0;
  t0 = cpu_seconds();
  tok.encode(text, false);
  double warm = cpu_seconds() - t0;
  t0 = cpu_seconds();
  encode_chunks(tok, text, 4096);
  double chunked = cpu_seconds() - t0;
  std::vector<int32_t> ids = tok.encode(text, false);
  t0 = cpu_seconds();
  std::string back = tok.decode(ids, false);
  double dec = cpu_seconds() - t0;
  t0 = cpu_seconds();
  tandem::IncrementalDecoder stream(shared, false);
  std::string streamed;
  for (int32_t id : ids) streamed += stream.push(id);
  streamed += stream.finish();
  double inc = cpu_seconds() - t0;
  fmt::print("{:<6} {:6.2f} MB, {:8} tokens ({:.2f} bytes/token)\n", name, mb, tokens,
             double(text.size()) / tokens);
  fmt::print("  encode, first pass (cold cache): {:7.2f} MB/s\n", mb / cold);
  fmt::print("  encode, second pass (warm cache): {:7.2f} MB/s\n", mb / warm);
  fmt::print("  encode, 4 KB prompts:            {:7.2f} MB/s\n", mb / chunked);
  fmt::print("  decode:                          {:7.2f} MB/s  (round trip {})\n", mb / dec,
             back == text ? "exact" : "differs (NFC)");
  fmt::print("  streaming decode:                {:7.2f} MB/s  ({})\n", mb / inc,
             streamed == back ? "equals decode" : "DIFFERS FROM DECODE");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    fs::path repo = fs::path(__FILE__).parent_path().parent_path();
    const char* cache = std::getenv("TANDEM_CACHE");
    fs::path tok_path =
        argc > 1 ? fs::path(argv[1])
                 : (cache && *cache ? fs::path(cache) : repo / ".cache") / "tokenizers" / "qwen3";
    size_t bytes = size_t((argc > 2 ? std::atof(argv[2]) : 4.0) * 1e6);
    double t0 = cpu_seconds();
    auto tok = Tokenizer::load(tok_path);
    fmt::print("loaded {} in {:.2f} s\n", tok_path.string(), cpu_seconds() - t0);
    auto prose_files =
        find_files("/usr/share/common-licenses", [](const fs::path&) { return true; });
    auto more_prose =
        find_files("/usr/share/doc", [](const fs::path& p) { return p.filename() == "copyright"; });
    prose_files.insert(prose_files.end(), more_prose.begin(), more_prose.end());
    auto code_files = find_files("/usr/include", [](const fs::path& p) {
      return p.extension() == ".h" || p.extension() == ".hpp";
    });
    bench_corpus(tok, "prose", corpus(prose_files, bytes));
    bench_corpus(tok, "code", corpus(code_files, bytes));
  } catch (const tandem::Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
