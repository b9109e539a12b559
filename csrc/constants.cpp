// constants.h: constants' records read once a process.
#include "constants.h"

#include <c10/core/StorageImpl.h>

#include <atomic>
#include <mutex>
#include <vector>

namespace aoti_debug_printer::constants {

struct Entry {
  explicit Entry(const at::Tensor& t) : storage(t.storage().getWeakStorageImpl()) {}
  // What makes `t` the same tensor, unchanged (constants.h).
  c10::weak_intrusive_ptr<c10::StorageImpl> storage;
  uintptr_t data = 0;
  uint64_t span = 0;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  at::DimVector sizes, strides;
  int64_t version = -1;  // -1: the tensor tracks none
  // Until its record has read it, nothing; then what it read.
  std::optional<Contents> contents;
};

namespace {

std::mutex mu;
// Guarded by mu. Entries of constants whose storage has gone are dropped
// when the table grows past kMostEntries (a process's weights, mostly).
std::vector<std::shared_ptr<Entry>> entries;
// entries.size(), read without the lock: most kernels' writes find none.
std::atomic<size_t> entry_count{0};
constexpr size_t kMostEntries = 4096;

int64_t version_of(const at::Tensor& t) {
  return t.is_inference() ? -1 : static_cast<int64_t>(t._version());
}

bool keyable(const at::Tensor& t) {
  return t.defined() && t.layout() == at::kStrided && t.has_storage();
}

bool same(const Entry& e, const at::Tensor& t) {
  return e.storage._unsafe_get_target() == t.storage().unsafeGetStorageImpl() &&
         !e.storage.expired() && e.data == reinterpret_cast<uintptr_t>(t.const_data_ptr()) &&
         e.dtype == t.scalar_type() && at::IntArrayRef(e.sizes) == t.sizes() &&
         at::IntArrayRef(e.strides) == t.strides() && e.version == version_of(t);
}

void set_count() { entry_count.store(entries.size(), std::memory_order_release); }

}  // namespace

bool is_constant(const Where& where) { return where.why == AOTI_DEBUG_PRINTER_WHY_CONSTANT; }

std::optional<Contents> find(const at::Tensor& t) {
  if (!keyable(t) || entry_count.load(std::memory_order_acquire) == 0) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& e : entries)
    if (e->contents && same(*e, t)) return e->contents;
  return std::nullopt;
}

std::shared_ptr<Entry> to_remember(const at::Tensor& t) {
  if (!keyable(t)) return nullptr;
  auto e = std::make_shared<Entry>(t);
  e->data = reinterpret_cast<uintptr_t>(t.const_data_ptr());
  e->span = bytes_spanned(t);
  e->dtype = t.scalar_type();
  e->sizes = t.sizes();
  e->strides = t.strides();
  e->version = version_of(t);
  std::lock_guard<std::mutex> lock(mu);
  if (entries.size() >= kMostEntries) {
    std::erase_if(entries, [](const auto& x) { return x->storage.expired(); });
    if (entries.size() >= kMostEntries) entries.clear();
  }
  // The same constant read again before its first read landed: the newer
  // read stands for it.
  std::erase_if(entries, [&](const auto& x) { return same(*x, t); });
  entries.push_back(e);
  set_count();
  return e;
}

void remember(const std::shared_ptr<Entry>& entry, const Contents& contents) {
  if (!entry || !contents.stats.unsupported.empty()) return;
  Contents kept{contents.stats, contents.values.defined() ? contents.values.clone() : at::Tensor()};
  std::lock_guard<std::mutex> lock(mu);
  // Gone from the table: a write to it came first.
  for (const auto& e : entries) {
    if (e == entry) {
      e->contents = std::move(kept);
      return;
    }
  }
}

void written(const at::Tensor& t) {
  if (!keyable(t) || entry_count.load(std::memory_order_acquire) == 0) return;
  const auto begin = reinterpret_cast<uintptr_t>(t.const_data_ptr());
  const uint64_t span = bytes_spanned(t);
  if (span == 0) return;
  std::lock_guard<std::mutex> lock(mu);
  std::erase_if(entries, [&](const auto& e) {
    return e->span > 0 && e->data < begin + span && begin < e->data + e->span;
  });
  set_count();
}

void forget_all() {
  if (entry_count.load(std::memory_order_acquire) == 0) return;
  std::lock_guard<std::mutex> lock(mu);
  entries.clear();
  set_count();
}

}  // namespace aoti_debug_printer::constants
