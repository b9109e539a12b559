#include "inputs.h"

#include "format.h"
#include "record.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace aoti_debug_printer::inputs {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

int64_t number(const std::string& s, const std::string& spec) {
  if (s.empty() ||
      !std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); }))
    throw std::invalid_argument("not a size: '" + s + "' in '" + spec + "'");
  return std::stoll(s);
}

// "LO..HI" or "LO.." or "N".
Range range_of(const std::string& s, const std::string& spec) {
  const size_t dots = s.find("..");
  if (dots == std::string::npos) {
    const int64_t n = number(s, spec);
    return {n, n};
  }
  const std::string hi = s.substr(dots + 2);
  return {number(s.substr(0, dots), spec), hi.empty() ? kNoBound : number(hi, spec)};
}

CompiledDim dim_of(std::string s, const std::string& spec) {
  CompiledDim d;
  const size_t paren = s.find('(');
  if (paren != std::string::npos) {
    if (s.back() != ')') throw std::invalid_argument("unclosed '(' in '" + spec + "'");
    d.exported = range_of(s.substr(paren + 1, s.size() - paren - 2), spec);
    s = s.substr(0, paren);
  }
  const size_t colon = s.find(':');
  if (colon == std::string::npos) {
    d.accepted = range_of(s, spec);
    if (!d.accepted.one())
      throw std::invalid_argument("a range needs a symbol or ?: '" + spec + "'");
    return d;
  }
  const std::string name = s.substr(0, colon);
  if (name.empty()) throw std::invalid_argument("a range with no symbol in '" + spec + "'");
  if (name != "?") d.symbol = name;
  d.accepted = range_of(s.substr(colon + 1), spec);
  return d;
}

// "[a,b,c]" into its items; "[]" into none.
std::vector<std::string> list_of(const std::string& s, const std::string& spec) {
  if (s.size() < 2 || s.front() != '[' || s.back() != ']')
    throw std::invalid_argument("expected [..] in '" + spec + "'");
  const std::string inner = s.substr(1, s.size() - 2);
  return inner.empty() ? std::vector<std::string>{} : split(inner, ',');
}

std::string list_text(c10::IntArrayRef values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

}  // namespace

std::string range_text(const Range& r) {
  if (r.one()) return std::to_string(r.lo);
  return std::to_string(r.lo) + ".." + (r.hi == kNoBound ? "" : std::to_string(r.hi));
}

CompiledInput parse(const std::string& spec) {
  const std::vector<std::string> words = split(spec, ' ');
  if (words.size() != 4)
    throw std::invalid_argument("expected 'DTYPE DEVICE [..] [..]': '" + spec + "'");
  CompiledInput c;
  c.dtype = words[0];
  c.device = words[1];
  for (const std::string& d : list_of(words[2], spec)) c.sizes.push_back(dim_of(d, spec));
  for (const std::string& s : list_of(words[3], spec)) {
    c.strides.push_back(s == "?" ? std::nullopt : std::optional<int64_t>(number(s, spec)));
  }
  if (c.strides.size() != c.sizes.size())
    throw std::invalid_argument("as many strides as sizes: '" + spec + "'");
  return c;
}

std::optional<Mismatch> check(const CompiledInput& compiled, const at::Tensor& t,
                              const std::string& input,
                              std::unordered_map<std::string, Binding>& symbols) {
  auto found = [&](std::string kind, int64_t dim, std::string given, std::string taken,
                   std::string message) {
    return Mismatch{std::move(kind), dim, std::move(given), std::move(taken),
                    "model input " + input + " " + message};
  };
  const std::string dtype = dtype_name(t.scalar_type());
  if (dtype != compiled.dtype) {
    return found("dtype", -1, dtype, compiled.dtype,
                 "is " + dtype + ", but this package was compiled for " + compiled.dtype);
  }
  const std::string device = c10::DeviceTypeName(t.device().type(), /*lower_case=*/true);
  if (device != compiled.device) {
    return found("device", -1, device, compiled.device,
                 "is on " + device + ", but this package was compiled for " + compiled.device);
  }
  const int64_t rank = t.dim();
  if (rank != static_cast<int64_t>(compiled.sizes.size())) {
    return found("rank", -1, std::to_string(rank), std::to_string(compiled.sizes.size()),
                 "has " + std::to_string(rank) + " dims, but this package was compiled for " +
                     std::to_string(compiled.sizes.size()));
  }
  // The words of a finding are made only where there is one: this runs
  // once per input of every run.
  auto at = [&](int64_t i) {
    return "dim " + std::to_string(i) + " is " + std::to_string(t.size(i)) + " (shape " +
           list_text(t.sizes()) + "), but this package ";
  };
  for (int64_t i = 0; i < rank; ++i) {
    const CompiledDim& d = compiled.sizes[i];
    const int64_t size = t.size(i);
    if (!d.accepted.holds(size)) {
      std::string takes = d.accepted.one() ? "was compiled for " + range_text(d.accepted) + " only"
                                           : "accepts " + range_text(d.accepted);
      if (d.exported) {
        takes += "; the exported program allows " + range_text(*d.exported) +
                 (d.exported->holds(size) ? ": the compiler narrowed it (the compile's "
                                            "line 'accepts fewer sizes' says where); compile "
                                            "again with an example of this size, or take out "
                                            "what narrowed it"
                                          : "");
      } else if (d.accepted.one()) {
        takes += ": export it with a torch.export.Dim that covers " + std::to_string(size) +
                 " and compile again";
      }
      return found("size", i, std::to_string(size), range_text(d.accepted), at(i) + takes);
    }
    if (d.symbol.empty()) continue;
    const auto bound = symbols.find(d.symbol);
    if (bound == symbols.end()) {
      symbols.emplace(d.symbol, Binding{size, "input " + input + " dim " + std::to_string(i)});
    } else if (bound->second.value != size) {
      return found("relation", i, std::to_string(size), std::to_string(bound->second.value),
                   at(i) + "takes it equal to " + bound->second.where + ", which is " +
                       std::to_string(bound->second.value));
    }
  }
  if (t.numel() == 0) return std::nullopt;  // no element to read through a stride
  for (int64_t i = 0; i < rank; ++i) {
    const std::optional<int64_t>& s = compiled.strides[i];
    // A dim of size 1 is indexed at 0 only: its stride is never used.
    if (!s || t.size(i) == 1 || t.stride(i) == *s) continue;
    std::vector<int64_t> wanted;
    for (const auto& w : compiled.strides) wanted.push_back(w.value_or(-1));
    return found("stride", i, std::to_string(t.stride(i)), std::to_string(*s),
                 "has stride " + std::to_string(t.stride(i)) + " in dim " + std::to_string(i) +
                     " (strides " + list_text(t.strides()) + "), but this package was compiled " +
                     "for " + std::to_string(*s) + ": its kernels read the memory as laid out " +
                     "then; pass a tensor laid out so (.contiguous() where that is contiguous)");
  }
  return std::nullopt;
}

}  // namespace aoti_debug_printer::inputs
