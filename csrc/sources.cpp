#include "sources.h"

#include "json.h"

#include <string_view>

namespace aoti_debug_printer::sources {
namespace {
// A run's table, on the thread that runs it. A generated wrapper passes the
// same text every run: it is copied only where it changed (a compare costs
// what a copy would, without the allocation).
thread_local std::string run_table;
// Whether this run was given one: a package compiled before ABI 9 gives
// none, and must not find the last run's.
thread_local bool given_this_run = false;

std::vector<std::string> frames_in_line(std::string_view line) {
  std::vector<std::string> frames;
  size_t start = line.find('\t');
  while (start != std::string_view::npos) {
    const size_t end = line.find('\t', start + 1);
    frames.emplace_back(
        line.substr(start + 1, end == std::string_view::npos ? end : end - start - 1));
    start = end;
  }
  return frames;
}
}  // namespace

void forget() { given_this_run = false; }

void set(const char* text) {
  const std::string_view given = text ? text : "";
  if (given != run_table) run_table.assign(given);
  given_this_run = true;
}

std::vector<std::string> of(const std::string& node) {
  if (node.empty() || !given_this_run) return {};
  const std::string_view text = run_table;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    if (line.size() > node.size() && line.compare(0, node.size(), node) == 0 &&
        line[node.size()] == '\t') {
      return frames_in_line(line);
    }
    at = end + 1;
  }
  return {};
}

std::string as_json() {
  JsonObject o;
  if (!given_this_run) return o.object();
  const std::string_view text = run_table;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    const size_t tab = line.find('\t');
    if (tab != std::string_view::npos) {
      JsonList frames;
      for (const std::string& f : frames_in_line(line)) frames.text(f);
      const std::string node(line.substr(0, tab));
      o.json(node.c_str(), frames.array());
    }
    at = end + 1;
  }
  return o.object();
}

}  // namespace aoti_debug_printer::sources
