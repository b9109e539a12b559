// Where the nodes of the running program came from in the user's code.
//
// The code generator passes, at each run's start, a table of the exported
// program's nodes and the user's frames that made each (innermost first,
// "model.py:42 in forward: return x * 2"), one line per node:
//   NODE \t FRAME \t FRAME ... \n
// (tabs and newlines never occur inside a name or a frame: the generator
// replaces them). Findings look their node up here: a lookup scans the
// table, which is fine for findings, which are few, and why records do not.
#pragma once

#include <string>
#include <vector>

namespace aoti_debug_printer::sources {

// A run begins on this thread: none known until set.
void forget();
// This thread's run takes `table` (a copy; empty: none known).
void set(const char* table);
// The frames of `node`, innermost first; empty where the table has none.
std::vector<std::string> of(const std::string& node);
// The whole table as a JSON object, node to its frames ("{}" where empty).
std::string as_json();

}  // namespace aoti_debug_printer::sources
