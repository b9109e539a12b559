// late.h: records written once what they wait for has landed.
#include "late.h"

#include "device.h"
#include "format.h"

namespace aoti_debug_printer {
namespace {

class DeviceRecord final : public LateRecord {
 public:
  DeviceRecord(TensorRecord r, std::shared_ptr<device::Landing> landing, bool json,
               std::shared_ptr<constants::Entry> constant)
      : record_(std::move(r)),
        landing_(std::move(landing)),
        json_(json),
        constant_(std::move(constant)) {}
  bool ready() const override { return device::landed(*landing_); }
  void wait() override { error_ = device::wait_for(*landing_); }
  std::string text() override {
    device::Snapshot snap = device::take(*landing_, error_);
    Contents contents{std::move(snap.stats), std::move(snap.values)};
    if (constant_) constants::remember(constant_, contents);
    fill_contents(record_, contents);
    landing_.reset();  // its slot of the ring is free again
    return format_record(record_, json_);
  }

 private:
  TensorRecord record_;
  std::shared_ptr<device::Landing> landing_;
  bool json_;
  std::shared_ptr<constants::Entry> constant_;
  std::string error_;
};

// A record whose statistics a generated kernel kept (device.h: StoredRun).
class StoredRecord final : public LateRecord {
 public:
  StoredRecord(TensorRecord r, std::shared_ptr<device::StoredRun> run, int64_t field, bool json)
      : record_(std::move(r)), run_(std::move(run)), field_(field), json_(json) {}
  bool ready() const override { return device::landed(*run_); }
  void wait() override { error_ = device::wait_for(*run_); }
  std::string text() override {
    record_.stats = device::stored_stats(*run_, field_, record_.numel, error_);
    run_.reset();  // the last record of a run gives its pinned memory back
    return format_record(record_, json_);
  }

 private:
  TensorRecord record_;
  std::shared_ptr<device::StoredRun> run_;
  int64_t field_;
  bool json_;
  std::string error_;
};

class FormattedLater final : public LateRecord {
 public:
  FormattedLater(TensorRecord r, bool json) : record_(std::move(r)), json_(json) {}
  bool ready() const override { return true; }
  void wait() override {}
  std::string text() override { return format_record(record_, json_); }

 private:
  TensorRecord record_;
  bool json_;
};

}  // namespace

std::unique_ptr<LateRecord> record_later(Where&& where, const at::Tensor& t, int64_t max_values,
                                         bool json, bool batched, ReadsWhileUnchanged& reads,
                                         std::shared_ptr<constants::Entry> constant) {
  std::shared_ptr<device::Landing> landing = reads.landing(t, max_values, batched);
  if (!landing) return nullptr;
  return std::make_unique<DeviceRecord>(describe(std::move(where), t, Contents{}),
                                        std::move(landing), json, std::move(constant));
}

std::unique_ptr<LateRecord> record_stored_later(Where&& where, const at::Tensor& t,
                                                std::shared_ptr<device::StoredRun> run,
                                                int64_t field, bool json) {
  return std::make_unique<StoredRecord>(describe(std::move(where), t, Contents{}), std::move(run),
                                        field, json);
}

std::unique_ptr<LateRecord> formatted_later(TensorRecord r, bool json) {
  return std::make_unique<FormattedLater>(std::move(r), json);
}

}  // namespace aoti_debug_printer
