// The logger's process-group hooks in C++: torch calls them around every operator of a group
// with no Python on the way (sleuth.logger.native says when they are used, and what stays Python).
//
// A pre-hook begins a record in `_commops`'s ring through its C API (commops_capi.h); the post-hook
// ends it when the operator's Work completes: through its future where it has one, else when
// Python's Work.wait or the drainer polls it (gloo's P2P works have no future). Sequence numbers
// are taken here exactly as sleuth.logger.session.Session.take_seq takes them. The one call into
// Python is a group's first operator, which resolves the group (its code and members) once.
#include <torch/extension.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "commops_capi.h"

namespace py = pybind11;

namespace {

// A hook name that is no communication operator (group management): not recorded
// (sleuth.logger.capture.NOT_AN_OPERATOR, which the table from Python uses too).
constexpr uint8_t kNotAnOperator = 255;
// The P2P directions of Session.take_seq's keys (sleuth.logger.hooks._SEND, _RECV).
constexpr int kSendDirection = 0, kRecvDirection = 1;
constexpr size_t kHookNames = 256;

// Sequence counters of one communicator, shared by every group object that resolves to it
// (as Session.take_seq shares a GroupInfo's).
struct Counters {
  std::mutex lock;
  uint64_t next_seq = 0;
  std::map<std::pair<int, int32_t>, uint64_t> p2p_seq;  // (direction, peer) -> next

  uint64_t take(int32_t peer, int direction) {
    std::lock_guard<std::mutex> guard(lock);
    if (peer < 0) return next_seq++;
    return p2p_seq[{direction, peer}]++;
  }
};

struct Capture;

struct Group {
  std::shared_ptr<Capture> capture;
  int64_t key = 0;  // what Python's resolver knows the group by
  std::atomic<bool> resolved{false};
  bool recorded = false;  // resolved to a communicator (else its operators pass unrecorded)
  uint32_t code = 0;
  std::vector<int32_t> ranks;
  std::shared_ptr<Counters> counters;
  std::atomic<bool> no_future[kHookNames] = {};  // per hook name: its works had no future
};

// What the post-hook needs of a begun operator, until its work completes.
struct Begun {
  std::shared_ptr<Group> group;
  int32_t handle = -1;
  bool any_source = false;  // a receive from any source: recorded whole once its sender is known
  uint64_t nbytes = 0;
  int64_t t0 = 0;
};

struct Started {
  const Group* group;
  int64_t op_id;
  Begun begun;
};

// Pre- and post-hook of one operator run on the thread that issues it, one after the other.
thread_local std::vector<Started> started;

struct Waiting {
  c10::intrusive_ptr<c10d::Work> work;
  Begun begun;
};

struct Capture : std::enable_shared_from_this<Capture> {
  const CommopsCApi* api = nullptr;
  void* recorder = nullptr;
  // Held for the process's life, never released: the last owner of a capture may be a group
  // destroyed on a thread without the GIL.
  PyObject* resolver = nullptr;
  uint8_t ops[kHookNames];
  // Our operator kinds (sleuth.records.OpKind, given by Python) that the hooks treat apart.
  uint8_t send = 0, recv = 0;
  bool output_side[kHookNames] = {};  // sized by the operator's outputs (else its inputs)
  std::unordered_map<uint32_t, std::shared_ptr<Counters>> counters;  // by communicator code; GIL-guarded
  std::mutex waiting_lock;
  std::vector<Waiting> waiting;
  std::atomic<size_t> n_waiting{0};
  std::atomic<uint64_t> unrecorded{0};
  std::mutex failure_lock;
  std::string failure;  // the first error in a hook, for Python to log once

  void fail(const char* where, const char* what) {
    std::lock_guard<std::mutex> guard(failure_lock);
    if (failure.empty()) failure = std::string(where) + ": " + what;
  }

  bool resolve(Group& group) {
    // Python runs only here, once per group: the GIL serializes it, so no lock of our own
    // (one would deadlock against a thread that holds the GIL and waits for it).
    if (_Py_IsFinalizing()) return false;
    py::gil_scoped_acquire gil;
    if (group.resolved.load(std::memory_order_acquire)) return group.recorded;
    try {
      py::object answer = py::reinterpret_borrow<py::object>(resolver)(group.key);
      if (!answer.is_none()) {
        auto [code, ranks] = answer.cast<std::pair<uint32_t, std::vector<int32_t>>>();
        auto& shared = counters[code];
        if (!shared) shared = std::make_shared<Counters>();
        group.code = code;
        group.ranks = std::move(ranks);
        group.counters = shared;
        group.recorded = true;
      }
    } catch (const std::exception& error) {  // py::error_already_set too: the group goes unrecorded
      fail("resolving a process group", error.what());
    }
    group.resolved.store(true, std::memory_order_release);
    return group.recorded;
  }

  void finish(const Begun& begun, c10d::Work* work) {
    if (!begun.any_source) {
      api->end(recorder, begun.handle);
      return;
    }
    const Group& group = *begun.group;
    int source = -1;
    try {
      if (work != nullptr) source = work->sourceRank();
    } catch (const std::exception&) {
      source = -1;
    }
    if (source < 0 || static_cast<size_t>(source) >= group.ranks.size()) {
      unrecorded++;
      return;
    }
    Record rec{};
    rec.comm = group.code;
    rec.peer = group.ranks[source];
    rec.seq = group.counters->take(rec.peer, kRecvDirection);
    rec.op = recv;
    rec.nbytes = begun.nbytes;
    rec.iteration = api->iteration(recorder);
    rec.t_issue_ns = rec.t_start_ns = begun.t0;
    rec.t_end_ns = api->now_ns();
    api->record(recorder, &rec);
  }

  // The job has waited on `work`: its record ends now, completed or not by the backend's flag
  // (gloo's reduce-scatter work never sets it), as the Python hooks end theirs.
  void waited(const c10::intrusive_ptr<c10d::Work>& work) {
    if (n_waiting.load(std::memory_order_acquire) == 0) return;
    std::vector<Waiting> done;
    {
      std::lock_guard<std::mutex> guard(waiting_lock);
      for (auto it = waiting.begin(); it != waiting.end();) {
        if (it->work.get() == work.get()) {
          done.push_back(std::move(*it));
          it = waiting.erase(it);
        } else {
          ++it;
        }
      }
      n_waiting.store(waiting.size(), std::memory_order_release);
    }
    for (auto& entry : done) finish(entry.begun, entry.work.get());
  }

  size_t poll() {
    if (n_waiting.load(std::memory_order_acquire) == 0) return 0;
    std::vector<Waiting> done;
    {
      std::lock_guard<std::mutex> guard(waiting_lock);
      auto still = waiting.begin();
      for (auto& entry : waiting) {
        bool completed = true;
        try {
          completed = entry.work->isCompleted();
        } catch (const std::exception&) {
          completed = true;  // a failed work is over too
        }
        if (completed) {
          done.push_back(std::move(entry));
        } else {
          *still++ = std::move(entry);
        }
      }
      waiting.erase(still, waiting.end());
      n_waiting.store(waiting.size(), std::memory_order_release);
    }
    for (auto& entry : done) finish(entry.begun, entry.work.get());
    return done.size();
  }
};

uint64_t side_bytes(const std::vector<at::Tensor>& tensors) {
  uint64_t total = 0;
  for (const auto& tensor : tensors) total += tensor.nbytes();
  return total;
}

void pre_hook(const std::shared_ptr<Group>& group, const c10d::PreHookArgs& args) {
  Capture& capture = *group->capture;
  uint8_t op = capture.ops[static_cast<uint8_t>(args.name)];
  if (op == kNotAnOperator) return;
  try {
    if (!group->resolved.load(std::memory_order_acquire)) capture.resolve(*group);
    if (!group->recorded) return;
    // An operator's size is its larger side: an all-gather's output, a reduce-scatter's input.
    uint64_t nbytes = side_bytes(capture.output_side[op] ? args.output_tensors : args.input_tensors);
    int32_t peer = -1;
    int direction = 0;
    if (op == capture.send || op == capture.recv) {
      if (args.root < 0) {  // a receive from any source: its peer is known at completion
        started.push_back({group.get(), args.op_id, {group, -1, true, nbytes, capture.api->now_ns()}});
        return;
      }
      if (static_cast<size_t>(args.root) >= group->ranks.size()) return;
      peer = group->ranks[args.root];
      direction = op == capture.send ? kSendDirection : kRecvDirection;
    }
    uint64_t seq = group->counters->take(peer, direction);
    int32_t handle = capture.api->begin(capture.recorder, group->code, seq, op, peer, nbytes,
                                        capture.api->iteration(capture.recorder));
    started.push_back({group.get(), args.op_id, {group, handle, false, 0, 0}});
  } catch (const std::exception& error) {  // the training loop never sees the logger's errors
    capture.fail("a native pre-hook", error.what());
  }
}

void post_hook(const std::shared_ptr<Group>& group, const c10d::PostHookArgs& args) {
  Capture& capture = *group->capture;
  Begun begun;
  bool found = false;
  for (auto it = started.rbegin(); it != started.rend(); ++it) {
    if (it->group == group.get() && it->op_id == args.op_id) {
      begun = std::move(it->begun);
      started.erase(std::next(it).base());
      found = true;
      break;
    }
  }
  if (!found) return;
  try {
    if (!args.work) {
      capture.finish(begun, nullptr);
      return;
    }
    auto& no_future = group->no_future[static_cast<uint8_t>(args.name)];
    c10::intrusive_ptr<c10::ivalue::Future> future;
    if (!no_future.load(std::memory_order_relaxed)) {
      try {
        future = args.work->getFuture();
      } catch (const std::exception&) {  // this backend's works of this kind have none: remembered
        no_future.store(true, std::memory_order_relaxed);
      }
    }
    if (future) {
      // The work owns its future, the future this callback: a weak reference breaks the cycle.
      c10::weak_intrusive_ptr<c10d::Work> work(args.work);
      future->addCallback(
          [begun = std::move(begun), work = std::move(work)](c10::ivalue::Future&) {
            auto alive = begun.any_source ? work.lock() : c10::intrusive_ptr<c10d::Work>();
            begun.group->capture->finish(begun, alive.get());
          },
          /*uses_future=*/false);
      return;
    }
    std::lock_guard<std::mutex> guard(capture.waiting_lock);
    capture.waiting.push_back({args.work, std::move(begun)});
    capture.n_waiting.store(capture.waiting.size(), std::memory_order_release);
  } catch (const std::exception& error) {
    capture.fail("a native post-hook", error.what());
  }
}

std::shared_ptr<Capture> make_capture(py::object recorder, py::object resolver, const std::vector<int>& ops, int send,
                                      int recv, const std::vector<int>& output_side) {
  auto* api = static_cast<const CommopsCApi*>(PyCapsule_Import(SLEUTH_COMMOPS_CAPI_NAME, 0));
  if (api == nullptr) throw py::error_already_set();
  if (api->version != SLEUTH_COMMOPS_CAPI_VERSION) throw std::runtime_error("sleuth's _commops has another C API version");
  py::object recorder_type = py::module_::import("sleuth.logger._commops").attr("Recorder");
  if (!py::isinstance(recorder, recorder_type)) throw py::type_error("native hooks need the C recorder (sleuth.logger._commops)");
  if (ops.size() > kHookNames) throw py::value_error("too many hook names");
  auto capture = std::make_shared<Capture>();
  capture->api = api;
  // Never released: a future's callback may end a record after the logger is gone, and the
  // recorder must outlive it (one recorder per process).
  capture->recorder = recorder.release().ptr();
  capture->resolver = resolver.release().ptr();
  std::fill(std::begin(capture->ops), std::end(capture->ops), kNotAnOperator);
  for (size_t i = 0; i < ops.size(); i++) capture->ops[i] = static_cast<uint8_t>(ops[i]);
  capture->send = static_cast<uint8_t>(send);
  capture->recv = static_cast<uint8_t>(recv);
  for (int op : output_side) capture->output_side[static_cast<uint8_t>(op)] = true;
  return capture;
}

void hook(const std::shared_ptr<Capture>& capture, const c10::intrusive_ptr<c10d::ProcessGroup>& pg, int64_t key,
          int64_t hook_id) {
  auto group = std::make_shared<Group>();
  group->capture = capture;
  group->key = key;
  pg->registerPreHook(hook_id, [group](const c10d::PreHookArgs& args) { pre_hook(group, args); });
  pg->registerPostHook(hook_id, [group](const c10d::PostHookArgs& args) { post_hook(group, args); });
}

// What any native capture pays before doing anything (benchmarks/bench_logger_hooks.py): hooks
// that read what ours read and put a completion callback on the work, and record nothing.
void hook_floor(const c10::intrusive_ptr<c10d::ProcessGroup>& pg, int64_t hook_id) {
  pg->registerPreHook(hook_id, [](const c10d::PreHookArgs& args) {
    volatile size_t seen = static_cast<size_t>(args.name) + args.input_tensors.size() + args.output_tensors.size() +
                           static_cast<size_t>(args.root + args.op_id);
    (void)seen;
  });
  pg->registerPostHook(hook_id, [](const c10d::PostHookArgs& args) {
    if (!args.work) return;
    try {
      args.work->getFuture()->addCallback([](c10::ivalue::Future&) {}, /*uses_future=*/false);
    } catch (const std::exception&) {
    }
  });
}

std::string take_failure(Capture& capture) {
  std::lock_guard<std::mutex> guard(capture.failure_lock);
  return capture.failure;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "sleuth's native process-group hooks (sleuth.logger.native)";
  m.def("hook_floor", &hook_floor, py::arg("group"), py::arg("hook_id"),
        "register hooks that only read the arguments and add a completion callback (the benchmark's floor)");
  py::class_<Capture, std::shared_ptr<Capture>>(m, "Capture")
      .def(py::init(&make_capture), py::arg("recorder"), py::arg("resolver"), py::arg("ops"), py::arg("send"),
           py::arg("recv"), py::arg("output_side"),
           "recorder: the C Recorder; resolver(key) -> (code, ranks) or None; ops[hook name] -> op kind "
           "(255: none); send, recv: those kinds; output_side: the kinds sized by their outputs")
      .def("hook", &hook, py::arg("group"), py::arg("key"), py::arg("hook_id"),
           "register the pre- and post-hook on a process group under hook_id")
      .def("poll", &Capture::poll, py::call_guard<py::gil_scoped_release>(),
           "end the records of completed works that have no future; returns how many")
      .def("waited", &Capture::waited, py::arg("work"), py::call_guard<py::gil_scoped_release>(),
           "the job has waited on work: end its records (works without a future)")
      .def_property_readonly("failure", &take_failure, "the first error in a hook, or ''")
      .def_property_readonly("unrecorded", [](const Capture& c) { return c.unrecorded.load(); },
                             "operators passed without a record (receives whose sender was unknown)")
      .def_property_readonly("waiting", [](const Capture& c) { return c.n_waiting.load(); },
                             "works without a future not yet seen completed");
}
