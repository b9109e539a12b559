#include "save.h"

#include "format.h"
#include "settings.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <unordered_map>

namespace aoti_debug_printer {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
  throw std::runtime_error(what + " '" + path + "': " + std::strerror(err));
}

// 0, or the errno of the write that failed.
int write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return 0;
}

// Writes a file's contents to `fd` (`path` names it in errors); throws
// where it cannot.
using FileWriter = std::function<void(int fd, const std::string& path)>;

// Has `write` fill a private temporary file, then links it under a free
// name `stem.pt`, `stem-1.pt`, ... (TakenNames): link() never replaces an existing
// file, so earlier snapshots (of this or another process) survive, and
// readers never see a partial file.
//
// The temporary file is named by PID, the process token and a counter, so
// no two processes' names collide (not even with one PID in two
// containers), and it is locked (flock) while it exists: a run killed
// mid-write leaves it unlocked, and the next run's first save in that
// directory removes it at once (remove_leftovers). It is created under a
// name ending in kUnlockedSuffix, locked, and only then renamed to its .pt
// name, so that no cleaner ever finds a live writer's file unlocked.
constexpr const char* kTmpPrefix = ".tmp-";
constexpr const char* kUnlockedSuffix = ".new";

// Where to start looking for a free name, for the stems this process found
// taken: a stem saved again and again (upstream's saves outside our runs,
// which name no launch; a rerun into the same directory) would otherwise
// try every earlier name first, quadratic in its saves. Only stems that
// collided are kept, at most kMax of them: link() keeps names apart either
// way, this only saves the tries.
class TakenNames {
 public:
  uint64_t first_free(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = first_free_.find(key);
    return it == first_free_.end() ? 0 : it->second;
  }
  void taken(const std::string& key, uint64_t suffix) {
    std::lock_guard<std::mutex> lock(mu_);
    if (first_free_.size() >= kMax) first_free_.clear();
    uint64_t& first = first_free_[key];
    first = std::max(first, suffix + 1);
  }

 private:
  static constexpr size_t kMax = 4096;
  std::mutex mu_;
  std::unordered_map<std::string, uint64_t> first_free_;  // by "dir/stem"
};

TakenNames& taken_names() {
  static auto* names = new TakenNames;  // never destroyed: a save may run at exit
  return *names;
}

std::string publish(const std::string& dir, const std::string& stem, const FileWriter& write) {
  static std::atomic<uint64_t> tmp_counter{0};
  const std::string tmp =
      in_dir(dir, kTmpPrefix + std::to_string(getpid()) + "-" + process_token() + "-" +
                      std::to_string(tmp_counter.fetch_add(1)) + ".pt");
  const std::string unlocked = tmp + kUnlockedSuffix;
  const int fd = ::open(unlocked.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot create a file in", dir, errno);
  ::flock(fd, LOCK_EX);
  if (::rename(unlocked.c_str(), tmp.c_str()) != 0) {
    const int err = errno;
    ::unlink(unlocked.c_str());
    ::close(fd);
    fail("cannot create a file in", dir, err);
  }
  const auto give_up = [&](const std::string& what, const std::string& path, int err) {
    ::unlink(tmp.c_str());
    ::close(fd);
    fail(what, path, err);
  };
  try {
    write(fd, tmp);
  } catch (const std::exception&) {
    ::unlink(tmp.c_str());
    ::close(fd);
    throw;
  }
  // A large file: the disk starts on it now, while the next one is made,
  // rather than when the kernel's writeback gets to it, so that a dump is
  // on the disk soon after its last file is written. Asks only; waits for
  // nothing. Small files are left to the kernel, which writes many of them
  // back together (started one by one, a model's 34 KB snapshots took
  // twice as long to reach the disk).
  constexpr off_t kStartWritebackFrom = off_t{1} << 20;
  if (::lseek(fd, 0, SEEK_CUR) >= kStartWritebackFrom) {
    (void)::sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
  }
  const std::string taken_key = in_dir(dir, stem);
  uint64_t suffix = taken_names().first_free(taken_key);
  std::string name;
  for (;; ++suffix) {
    name = stem + (suffix ? "-" + std::to_string(suffix) : "") + ".pt";
    if (::link(tmp.c_str(), in_dir(dir, name).c_str()) == 0) break;
    const int err = errno;
    if (err != EEXIST) give_up("cannot create", in_dir(dir, name), err);
  }
  if (suffix > 0) taken_names().taken(taken_key, suffix);
  ::unlink(tmp.c_str());
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(in_dir(dir, name).c_str());
    fail("cannot write", in_dir(dir, name), err);
  }
  return name;
}

// Temporary files of runs that were killed while saving: a .pt one that no
// one holds locked (its writer is gone), at once; one still under its
// unlocked name, once it is a minute old (a writer holds that name for the
// two system calls that lock and rename it).
void remove_leftovers(const std::string& dir) {
  // Never destroyed: the saver's thread saves while the process exits.
  static auto* mu = new std::mutex;
  static auto* cleaned = new std::set<std::string>;
  {
    std::lock_guard<std::mutex> lock(*mu);
    if (!cleaned->insert(dir).second) return;
  }
  std::error_code ec;
  int removed = 0;
  const auto now = std::filesystem::file_time_type::clock::now();
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string file = entry.path().filename().string();
    if (file.rfind(kTmpPrefix, 0) != 0) continue;
    const std::string extension = entry.path().extension().string();
    if (extension == kUnlockedSuffix) {
      std::error_code time_ec;
      const auto touched = std::filesystem::last_write_time(entry.path(), time_ec);
      if (time_ec || now - touched < std::chrono::minutes(1)) continue;
    } else if (extension != ".pt") {
      continue;
    }
    const int fd = ::open(entry.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && ::unlink(entry.path().c_str()) == 0) ++removed;
    ::close(fd);
  }
  if (removed > 0) {
    report_note("removed " + std::to_string(removed) + " unfinished temporary file" +
                (removed > 1 ? "s" : "") + " of a run killed while saving, in " + dir);
  }
}

// O_APPEND with one write() per line: lines of concurrent processes do not
// interleave on local file systems; the mutex covers this process's threads.
void append_line(const std::string& path, const std::string& line) {
  static auto* mu = new std::mutex;  // never destroyed, as above
  std::lock_guard<std::mutex> lock(*mu);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot open", path, errno);
  // One write() per line; where it is cut short (a full disk), what it
  // wrote is cut off again: a line is in the file whole or not at all.
  ssize_t n;
  do {
    n = ::write(fd, line.data(), line.size());
  } while (n < 0 && errno == EINTR);
  const int err = n < 0 ? errno : ENOSPC;
  if (n >= 0 && static_cast<size_t>(n) < line.size()) {
    const off_t end = ::lseek(fd, 0, SEEK_END);
    if (end >= n && ::ftruncate(fd, end - n) != 0) { /* the reader skips a torn last line */
    }
  }
  ::close(fd);
  if (n < 0 || static_cast<size_t>(n) < line.size()) fail("cannot write", path, err);
}

// Python's torch.load rebuilds a LibTorch-pickled tensor through its legacy
// storage class (torch.FloatStorage, ...). The dtypes that came after those
// classes have none, and LibTorch still names one (torch.Float8_e4m3fnStorage),
// so its files of them cannot be loaded at all. For these dtypes we write what
// Python's torch.save writes: _rebuild_tensor_v3 over an UntypedStorage, the
// dtype given as a global. Returns the dtype's Python name.
std::optional<std::string_view> dtype_without_storage_class(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat8_e4m3fn: return "float8_e4m3fn";
    case at::kFloat8_e5m2: return "float8_e5m2";
    case at::kFloat8_e4m3fnuz: return "float8_e4m3fnuz";
    case at::kFloat8_e5m2fnuz: return "float8_e5m2fnuz";
    case at::kFloat8_e8m0fnu: return "float8_e8m0fnu";
    case at::kFloat4_e2m1fn_x2: return "float4_e2m1fn_x2";
    case at::kComplexHalf: return "complex32";
    case at::kUInt16: return "uint16";
    case at::kUInt32: return "uint32";
    case at::kUInt64: return "uint64";
    default: return std::nullopt;
  }
}

// The few pickle (protocol 2) opcodes that program needs.
class Pickle {
 public:
  Pickle() { bytes_ += "\x80\x02"; }
  Pickle& op(char code) {
    bytes_ += code;
    return *this;
  }
  Pickle& global(std::string_view module, std::string_view name) {
    ((bytes_ += 'c') += module) += '\n';
    (bytes_ += name) += '\n';
    return *this;
  }
  Pickle& text(std::string_view s) {
    bytes_ += 'X';
    little_endian(static_cast<uint32_t>(s.size()), 4);
    bytes_ += s;
    return *this;
  }
  Pickle& integer(int64_t v) {
    if (v >= INT32_MIN && v <= INT32_MAX) {
      bytes_ += 'J';  // BININT
      little_endian(static_cast<uint64_t>(v), 4);
    } else {
      bytes_ += "\x8a\x08";  // LONG1, 8 bytes of two's complement
      little_endian(static_cast<uint64_t>(v), 8);
    }
    return *this;
  }
  Pickle& ints(c10::IntArrayRef values) {
    op('(');
    for (const int64_t v : values) integer(v);
    return op('t');
  }
  const std::string& finish() { return op('.').bytes_; }

 private:
  void little_endian(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes_ += static_cast<char>((v >> (8 * i)) & 0xff);
  }
  std::string bytes_;
};

void write_as_torch_save(caffe2::serialize::PyTorchStreamWriter& writer, const at::Tensor& host,
                         std::string_view dtype) {
  const at::Tensor value = host.contiguous();
  const size_t nbytes = static_cast<size_t>(value.numel()) * value.element_size();
  Pickle p;
  p.global("torch._utils", "_rebuild_tensor_v3").op('(');
  p.op('(')
      .text("storage")
      .global("torch.storage", "UntypedStorage")
      .text("0")
      .text("cpu")
      .integer(static_cast<int64_t>(nbytes))
      .op('t')
      .op('Q');                                                       // BINPERSID
  p.integer(0).ints(value.sizes()).ints(value.strides()).op('\x89');  // requires_grad=False
  p.global("collections", "OrderedDict").op(')').op('R');             // no backward hooks
  p.global("torch", dtype).op('t').op('R');
  const std::string& program = p.finish();
  writer.writeRecord("data.pkl", program.data(), program.size());
  writer.writeRecord("data/0", value.const_data_ptr(), nbytes);
}

// What torch::jit::pickle_save(host) returns, byte for byte, written as it
// goes (pickle_save gathers it in memory).
void write_as_pickle_save(caffe2::serialize::PyTorchStreamWriter& writer, const at::Tensor& host) {
  std::vector<char> program;
  torch::jit::Pickler pickler(
      [&](const char* bytes, size_t size) { program.insert(program.end(), bytes, bytes + size); });
  pickler.protocol();
  pickler.pushIValue(host);
  pickler.stop();
  torch::jit::writeArchiveAndTensors("data", program.data(), program.size(), pickler.tensorData(),
                                     writer);
}

// The archive torch.save writes, streamed into `fd` as it is made: the
// tensor's bytes go from its memory to the file, with no copy of the whole
// archive in memory first. The zip writer is never handed an error (its
// destructor would end the process on one): a failed write is remembered,
// nothing more is written, and it is thrown once the archive is done.
void write_tensor(int fd, const std::string& path, const at::Tensor& host) {
  int error = 0;
  {
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t size) {
      if (error == 0) error = write_all(fd, static_cast<const char*>(data), size);
      return size;
    });
    if (const auto dtype = dtype_without_storage_class(host.scalar_type())) {
      write_as_torch_save(writer, host, *dtype);
    } else {
      write_as_pickle_save(writer, host);
    }
    writer.writeEndOfFile();
  }
  if (error != 0) fail("cannot write", path, error);
}

std::string phase_tag(const Where& w) {
  switch (w.phase) {
    case Phase::BeforeLaunch: return "before";
    case Phase::AfterLaunch: return "after";
    case Phase::ModelInput: return "input";
    case Phase::Upstream: return safe_name_part(w.label);
  }
  return safe_name_part(phase_name(w.phase));
}

}  // namespace

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

namespace {
// A file name stays under the file system's 255 bytes (with "-N.pt" after
// it): a long stem is cut and keeps a digest of the whole, so names stay
// apart. FNV-1a: the same name in every process.
std::string capped(const std::string& stem) {
  constexpr size_t kMax = 200;
  if (stem.size() <= kMax) return stem;
  uint64_t h = 1469598103934665603ull;
  for (const unsigned char ch : stem) h = (h ^ ch) * 1099511628211ull;
  char digest[24];
  std::snprintf(digest, sizeof digest, "-%016llx", static_cast<unsigned long long>(h));
  return stem.substr(0, kMax - 17) + digest;
}
}  // namespace

static void make_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create directory '" + dir + "': " + ec.message());
}

std::string in_dir(const std::string& dir, const std::string& name) {
  if (!dir.empty() && dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

void append_to_manifest(const std::string& dir, const std::string& line) {
  make_dir(dir);
  append_line(in_dir(dir, "manifest.jsonl"), line);
}

std::string environment_to_note(const std::string& dir, const TensorRecord& record) {
  // A run belongs to one thread and its snapshots come in order, so
  // remembering the last (run, rank, directory) a thread noted is enough: no
  // lock and no set growing with every run, and nothing per snapshot.
  struct Noted {
    int64_t run = -1, rank = -1;
    std::string dir;
  };
  thread_local Noted last;
  const Where& w = record.where;
  if (last.run == w.run && last.rank == w.rank && last.dir == dir) return "";
  last = {w.run, w.rank, dir};
  return format_environment(w, record.device.str());
}

std::string save_snapshot(const std::string& dir, const TensorRecord& record,
                          const at::Tensor& host, const std::optional<std::string>& environment) {
  make_dir(dir);
  // Temporary files killed runs left there go before the first snapshot
  // (once per directory), and the run's environment line before its first.
  remove_leftovers(dir);
  const std::string noted = environment ? *environment : environment_to_note(dir, record);
  if (!noted.empty()) append_line(in_dir(dir, "manifest.jsonl"), noted);

  // A view of a larger buffer would drag the whole buffer into the file;
  // save just the elements, in the view's shape.
  at::Tensor value = host;
  if (value.layout() == at::kStrided &&
      value.storage().nbytes() > static_cast<size_t>(value.numel()) * value.element_size()) {
    value = value.contiguous().clone();
  }

  const Where& w = record.where;
  // Sorting the names sorts by run and launch; the call index tells apart
  // two calls of one kernel, publish() the same snapshot taken again.
  char launch[32];
  std::snprintf(launch, sizeof launch, "%05lld", static_cast<long long>(w.launch));
  // Ranks of one job share a directory: the rank leads, so names never collide.
  const std::string stem =
      (w.rank >= 0 ? "rank" + std::to_string(w.rank) + "-" : std::string()) + "run" +
      std::to_string(w.run) +
      (w.launch < 0
           ? "-" + phase_tag(w) + "-" + safe_name_part(w.arg)
           : "-launch" + std::string(launch) + "-" + phase_tag(w) + "-" + safe_name_part(w.kernel) +
                 "-" + safe_name_part(w.arg) + "-call" + std::to_string(w.call));
  std::string name;
  try {
    name = publish(dir, capped(stem),
                   [&](int fd, const std::string& path) { write_tensor(fd, path, value); });
  } catch (const std::exception& e) {
    // The record stays, saying why it has no file, where the manifest still
    // takes a line (a snapshot too large for what is left of the disk): a
    // dump read later counts the value as lost, where it would otherwise
    // look as if no kernel had written it.
    try {
      append_line(in_dir(dir, "manifest.jsonl"), format_json(record, "", e.what()) + "\n");
    } catch (const std::exception&) {  // the disk has no room for the line either
    }
    throw;
  }
  append_line(in_dir(dir, "manifest.jsonl"), format_json(record, name) + "\n");
  return name;
}

namespace {
struct SaveFailures {
  std::atomic<int64_t> count{0};
  ~SaveFailures() {
    const int64_t n = count.load();
    if (n > 1) report_error(std::to_string(n) + " snapshots in all could not be saved");
  }
} failures;
}  // namespace

void saving(const std::function<void()>& save) {
  try {
    save();
  } catch (const std::exception& e) {
    if (failures.count.fetch_add(1) == 0) {
      report_error(std::string(e.what()) +
                   "; the model keeps running, and further save failures are only counted");
    }
  }
}

int64_t save_failures() { return failures.count.load(); }

void save_watched(const std::string& dir, const Where& at_kernel,
                  std::vector<WatchedArg>& watched) {
  for (WatchedArg& a : watched) {
    if (!a.host.defined()) continue;
    const Where at = before_launch_of(at_kernel, a.name);
    saving([&] {
      a.saved_as =
          in_dir(dir, save_snapshot(dir, describe(at, a.host, host_contents(a.host, 0)), a.host));
    });
  }
}

}  // namespace aoti_debug_printer
