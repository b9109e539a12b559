// constants.h: constants' records read once a process.
#include "constants.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <map>
#include <mutex>

namespace aoti_debug_printer::constants {

struct Entry {
  explicit Entry(const at::Tensor& t) : view(t), version(version_of(t)) {}
  static int64_t version_of(const at::Tensor& t) {
    return t.is_inference() ? -1 : static_cast<int64_t>(t._version());
  }
  // What makes `t` the same tensor, unchanged (constants.h).
  bool is(const at::Tensor& t) const { return view.is(t) && version == version_of(t); }
  TensorView view;
  int64_t version;  // -1: the tensor tracks none
  // Until its record has read it, nothing; then what it read.
  std::optional<Contents> contents;
};

namespace {

std::mutex mu;
// Guarded by mu: the entries by where their memory starts. Entries of
// constants whose storage has gone are dropped when the table grows past
// kMostEntries (a process's weights, mostly).
std::multimap<uintptr_t, std::shared_ptr<Entry>> entries;
uint64_t widest = 0;  // the largest span of an entry, guarded by mu
constexpr size_t kMostEntries = 4096;
// The bytes every entry lies in ([lowest, highest)), read without the lock:
// a kernel's output mostly lies outside AOTInductor's constants blob, and
// its write then takes no lock. Empty (lowest >= highest) without entries.
std::atomic<uintptr_t> lowest{std::numeric_limits<uintptr_t>::max()};
std::atomic<uintptr_t> highest{0};

// An entry was added, under mu.
void bounds_take(const Entry& e) {
  lowest.store(std::min(lowest.load(std::memory_order_relaxed), e.view.data),
               std::memory_order_release);
  highest.store(std::max(highest.load(std::memory_order_relaxed), e.view.data + e.view.span),
                std::memory_order_release);
  widest = std::max(widest, e.view.span);
}

// Entries were removed, under mu.
void bounds_changed() {
  uintptr_t low = std::numeric_limits<uintptr_t>::max(), high = 0;
  widest = 0;
  for (const auto& [data, e] : entries) {
    low = std::min(low, data);
    high = std::max(high, data + e->view.span);
    widest = std::max(widest, e->view.span);
  }
  lowest.store(low, std::memory_order_release);
  highest.store(high, std::memory_order_release);
}

bool none_kept() {
  return lowest.load(std::memory_order_acquire) >= highest.load(std::memory_order_acquire);
}

bool none_between(uintptr_t begin, uint64_t bytes) {
  return begin + bytes <= lowest.load(std::memory_order_acquire) ||
         begin >= highest.load(std::memory_order_acquire);
}

}  // namespace

bool is_constant(const Where& where) { return where.why == AOTI_DEBUG_PRINTER_WHY_CONSTANT; }

std::optional<Contents> find(const at::Tensor& t) {
  if (!viewable(t)) return std::nullopt;
  const auto data = reinterpret_cast<uintptr_t>(t.const_data_ptr());
  if (none_between(data, 1)) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu);
  const auto [from, to] = entries.equal_range(data);
  for (auto it = from; it != to; ++it)
    if (it->second->contents && it->second->is(t)) return it->second->contents;
  return std::nullopt;
}

std::shared_ptr<Entry> to_remember(const at::Tensor& t) {
  // An empty tensor's record reads nothing.
  if (!viewable(t) || bytes_spanned(t) == 0) return nullptr;
  auto e = std::make_shared<Entry>(t);
  std::lock_guard<std::mutex> lock(mu);
  if (entries.size() >= kMostEntries) {
    std::erase_if(entries, [](const auto& x) { return x.second->view.storage.expired(); });
    if (entries.size() >= kMostEntries) entries.clear();
    bounds_changed();
  }
  // The same constant read again before its first read landed: the newer
  // read stands for it.
  const auto [from, to] = entries.equal_range(e->view.data);
  for (auto it = from; it != to;) it = it->second->is(t) ? entries.erase(it) : std::next(it);
  entries.emplace(e->view.data, e);
  bounds_take(*e);
  return e;
}

void remember(const std::shared_ptr<Entry>& entry, const Contents& contents) {
  if (!entry || !contents.stats.unsupported.empty()) return;
  Contents kept{contents.stats, contents.values.defined() ? contents.values.clone() : at::Tensor()};
  std::lock_guard<std::mutex> lock(mu);
  // Gone from the table: a write to it came first.
  const auto [from, to] = entries.equal_range(entry->view.data);
  for (auto it = from; it != to; ++it) {
    if (it->second == entry) {
      entry->contents = std::move(kept);
      return;
    }
  }
}

void written(const at::Tensor& t) {
  if (!viewable(t)) return;
  const auto begin = reinterpret_cast<uintptr_t>(t.const_data_ptr());
  const uint64_t span = bytes_spanned(t);
  if (span == 0 || none_between(begin, span)) return;
  std::lock_guard<std::mutex> lock(mu);
  // Entries that start within `widest` bytes before the write, or inside it.
  auto it = entries.lower_bound(begin > widest ? begin - widest : 0);
  const auto end = entries.lower_bound(begin + span);
  bool erased = false;
  while (it != end) {
    if (it->second->view.overlaps(begin, span)) {
      it = entries.erase(it);
      erased = true;
    } else {
      ++it;
    }
  }
  if (erased) bounds_changed();
}

void forget_all() {
  if (none_kept()) return;
  std::lock_guard<std::mutex> lock(mu);
  entries.clear();
  bounds_changed();
}

}  // namespace aoti_debug_printer::constants
