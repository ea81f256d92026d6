// One process's UCX (UCP) endpoint for tensor payloads: a context, a worker and the one progress
// thread that owns them, woken by the worker's event fd; tagged sends and receives are posted to
// it from any thread, and their completions run on it (a claim of a prefetched message that is
// already in completes on the claiming thread).
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/result.hpp"

namespace pipeworks {

// A UCP worker address, exchanged out of band (in pipeworks, inside CAF messages).
using ucx_address = std::vector<std::uint8_t>;

// Which transports a worker may use: any (shared memory between processes of one host and
// network namespace, else TCP), or the network only (TCP), for peers in another host or namespace:
// UCX takes every process of one machine for a shared-memory peer, but its shared memory wakes a
// peer through a socket of the network namespace, and a run across namespaces would stall.
enum class ucx_reach { local, network };

class ucx_transport {
 public:
  // Called once on the progress thread: "" when the transfer completed, else why it failed.
  using done_fn = std::function<void(const std::string& error)>;

  // Whether this build has UCX at all.
  static bool available();
  // Opens a context and a worker and starts the progress thread; an error names the UCX call.
  static result<std::shared_ptr<ucx_transport>> open(ucx_reach reach = ucx_reach::local);
  // The process's transport of each reach, opened on first use and kept until the process ends.
  static result<std::shared_ptr<ucx_transport>> process(ucx_reach reach);
  // Lets go of the process's transports: the next process() opens new ones (a new UCX worker, with
  // a new address and new shared-memory queues), while runs that hold the old ones keep them until
  // they let go. For a process that goes on after a run whose peer was lost: a peer killed while
  // it wrote into this worker's shared-memory receive queue (UCX's mm FIFO, which every peer on
  // the host writes into) leaves a slot reserved and never marked written, and the queue is read
  // in order: nothing any peer sends through it afterwards is ever read.
  static void retire_process_transports();
  // Ends the process's transports, and any transport let go on its own progress thread, joining
  // their threads here; call it once no run uses them (the CLI does, before exit), so that UCX is
  // never torn down beside the process's static destruction. A later process() opens anew.
  static void end_process_transports();
  // Where this process may share memory: its boot, network namespace and IPC namespace. Two
  // processes of equal scope use the local transport, others the network one.
  static std::string scope();

  virtual ~ucx_transport() = default;
  ucx_transport(const ucx_transport&) = delete;
  ucx_transport& operator=(const ucx_transport&) = delete;

  // This worker's address, for peers to reach it.
  virtual const ucx_address& address() const = 0;
  // Sends n bytes at `data` with `tag` to the worker at `peer` (an endpoint is made on first use).
  // `hold` keeps the bytes alive until `done` has run.
  virtual void send(const ucx_address& peer, std::uint64_t tag, const void* data, std::size_t n,
                    std::shared_ptr<const void> hold, done_fn done) = 0;
  // Receiving ahead of the asker: the messages whose tag has `value` in the bits of `mask` are
  // received as soon as they come, each into the buffer `into(n)` gives (owned by its token; a
  // null buffer refuses the message, which is then received into nothing), before anyone claims
  // them; so a transfer never waits for the message that announces it. At most `budget` bytes or
  // 4096 messages are held at once (one message always), from the start of a receive until it is
  // claimed or dropped, and at most 16 MiB are on their way at once; beyond that, messages wait in
  // UCX. A message not claimed within `keep` after it came is dropped.
  struct early_buffer {
    void* data = nullptr;
    std::shared_ptr<void> token;
  };
  using early_into = std::function<early_buffer(std::size_t n)>;
  virtual void prefetch(std::uint64_t mask, std::uint64_t value, std::size_t budget,
                        std::chrono::milliseconds keep, early_into into) = 0;
  // Takes the prefetched message with `tag`, which must be n bytes: `done(token, "")` once it is
  // all in, else `done(nullptr, why)` (another length, refused, cancelled, or not begun to arrive
  // within `patience`). `done` runs on this thread before claim returns when the message is in
  // already, else later on the progress thread.
  using claim_fn = std::function<void(std::shared_ptr<void> token, const std::string& error)>;
  virtual void claim(std::uint64_t tag, std::size_t n, claim_fn done,
                     std::chrono::milliseconds patience) = 0;
  // Ends the prefetch registered with (mask, value): its claims fail, its receives are cancelled and
  // what it holds is dropped. Returns once that is done; called from one of this transport's own
  // callbacks (on its progress thread, maybe inside UCX), it is done at the loop's next turn.
  virtual void stop_prefetch(std::uint64_t mask, std::uint64_t value) = 0;
  // Whether this host runs more of the run's processes than it has cores: then the progress
  // thread, which polls while transfers move, yields its core after every poll.
  virtual void set_crowded(bool crowded) = 0;
  // The transports UCX chose to reach `peer` (for logs and tests), after a send completed there.
  virtual std::string lanes(const ucx_address& peer) const = 0;

 protected:
  ucx_transport() = default;
};

}  // namespace pipeworks
