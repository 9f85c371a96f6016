// The recording that MYOPS_TRACE appends to, and the operators that start and stop it, in a namespace of
// their own (see NOTE [ Recording the path of a call ] in trace.h). myops.dispatch.record_path calls them.
#include <torch/library.h>

#include <sstream>
#include <string>

#include "trace.h"

namespace {

myops::trace::Recording recording;

int64_t recording_address() {
  return reinterpret_cast<int64_t>(&recording);
}

void start() {
  TORCH_CHECK(!recording.on.load(), "myops_trace::start: a recording is already running; stop it first");
  recording.steps.clear();
  recording.depth = 0;
  recording.thread = std::this_thread::get_id();
  recording.on.store(true, std::memory_order_release);
}

// One line per kernel that ran, in order: its key, its file, the raw bits of the exclude set, its depth.
std::string stop() {
  recording.on.store(false, std::memory_order_release);
  std::ostringstream lines;
  for (const auto& step : recording.steps) {
    lines << c10::toString(step.key) << '\t' << step.file << '\t' << step.excluded.raw_repr() << '\t'
          << step.depth << '\n';
  }
  recording.steps.clear();
  return lines.str();
}

}  // namespace

TORCH_LIBRARY(myops_trace, m) {
  m.def("recording() -> int", &recording_address);
  m.def("start() -> ()", &start);
  m.def("stop() -> str", &stop);
}
