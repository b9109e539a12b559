#include "save.h"

#include <torch/csrc/jit/serialization/pickle.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace aoti_debug_printer {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
  throw std::runtime_error(what + " '" + path + "': " + std::strerror(err));
}

void write_all(int fd, const char* data, size_t size, const std::string& path) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write", path, errno);
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
}

// Writes `bytes` to a private temporary file, then links it under the first
// free name `stem.pt`, `stem-1.pt`, ...: link() never replaces an existing
// file, so earlier snapshots (of this or another process) survive, and
// readers never see a partial file.
std::string publish(const std::string& dir, const std::string& stem,
                    const std::vector<char>& bytes) {
  static std::atomic<uint64_t> tmp_counter{0};
  const std::string tmp = dir + "/.tmp-" + std::to_string(getpid()) + "-" +
                          std::to_string(tmp_counter.fetch_add(1)) + ".pt";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot create a file in", dir, errno);
  try {
    write_all(fd, bytes.data(), bytes.size(), tmp);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail("cannot write", tmp, err);
  }
  for (int attempt = 0;; ++attempt) {
    const std::string name = stem + (attempt ? "-" + std::to_string(attempt) : "") + ".pt";
    if (::link(tmp.c_str(), (dir + "/" + name).c_str()) == 0) {
      ::unlink(tmp.c_str());
      return name;
    }
    const int err = errno;
    if (err != EEXIST || attempt > 10000) {
      ::unlink(tmp.c_str());
      fail("cannot create", dir + "/" + name, err);
    }
  }
}

// O_APPEND with one write() per line: lines of concurrent processes do not
// interleave on local file systems; the mutex covers this process's threads.
void append_line(const std::string& path, const std::string& line) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot open", path, errno);
  try {
    write_all(fd, line.data(), line.size(), path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

std::string phase_tag(const std::string& phase) {
  if (phase == "before_launch") return "before";
  if (phase == "after_launch") return "after";
  if (phase == "model_input") return "input";
  return safe_name_part(phase);
}

} // namespace

std::string safe_name_part(const std::string& s) {
  std::string out;
  for (const char ch : s) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || ch == '.';
    out += ok ? ch : '_';
    if (out.size() >= 80) break;
  }
  while (!out.empty() && out.front() == '.') out.front() = '_';
  return out.empty() ? "_" : out;
}

static void make_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create directory '" + dir + "': " + ec.message());
}

void append_to_manifest(const std::string& dir, const std::string& line) {
  make_dir(dir);
  append_line(dir + "/manifest.jsonl", line);
}

std::string save_snapshot(const std::string& dir, const TensorRecord& record,
                          const at::Tensor& host) {
  make_dir(dir);

  // A view of a larger buffer would drag the whole buffer into the file;
  // save just the elements, in the view's shape.
  at::Tensor value = host;
  if (value.layout() == at::kStrided &&
      value.storage().nbytes() > static_cast<size_t>(value.numel()) * value.element_size()) {
    value = value.contiguous().clone();
  }
  const std::vector<char> bytes = torch::jit::pickle_save(value);

  const Where& w = record.where;
  // Sorting the names sorts by run and launch; the call index tells apart
  // two calls of one kernel, publish() the same snapshot taken again.
  char launch[32];
  std::snprintf(launch, sizeof launch, "%05lld", static_cast<long long>(w.launch));
  // Ranks of one job share a directory: the rank leads, so names never collide.
  const std::string stem =
      (w.rank >= 0 ? "rank" + std::to_string(w.rank) + "-" : std::string()) +
      "run" + std::to_string(w.run) +
      (w.launch < 0 ? "-" + phase_tag(w.phase) + "-" + safe_name_part(w.arg)
                    : "-launch" + std::string(launch) + "-" + phase_tag(w.phase) + "-" +
                          safe_name_part(w.kernel) + "-" + safe_name_part(w.arg) + "-call" +
                          std::to_string(w.call));
  const std::string name = publish(dir, stem, bytes);
  append_line(dir + "/manifest.jsonl",
              format_json(record, ", \"file\": " + json_string(name)) + "\n");
  return name;
}

} // namespace aoti_debug_printer
