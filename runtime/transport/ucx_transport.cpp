// The UCP transport: context and worker in single-thread mode, owned by one progress thread that
// drains posted commands, progresses the worker until idle, polls while transfers move, else arms
// it and sleeps on its event fd (ucp_worker_signal wakes it for new commands). Endpoints use peer
// error handling, so a send to a dead peer completes with an error instead of hanging.
#include "runtime/transport/ucx_transport.hpp"

#include <sys/stat.h>

#include <cstdio>

#ifdef PIPEWORKS_HAVE_UCX
#include <poll.h>
#include <sched.h>
#include <ucp/api/ucp.h>
#include <ucs/config/global_opts.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <list>
#include <set>
#include <thread>
#include <utility>
#include <vector>
#endif

namespace pipeworks {

std::string ucx_transport::scope() {
  std::string boot;
  if (std::FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char line[64] = {};
    if (std::fgets(line, sizeof line, f)) boot = line;
    std::fclose(f);
    while (!boot.empty() && (boot.back() == '\n' || boot.back() == ' ')) boot.pop_back();
  }
  auto inode = [](const char* path) {
    struct stat st{};
    return ::stat(path, &st) == 0 ? std::to_string(st.st_ino) : std::string("?");
  };
  return boot + "/net:" + inode("/proc/self/ns/net") + "/ipc:" + inode("/proc/self/ns/ipc");
}

#ifndef PIPEWORKS_HAVE_UCX

bool ucx_transport::available() { return false; }
result<std::shared_ptr<ucx_transport>> ucx_transport::open(ucx_reach) {
  return make_error("this pipeworks was built without UCX (install libucx-dev and rebuild), so "
                    "tensors cannot go over UCX; use --transport caf");
}
result<std::shared_ptr<ucx_transport>> ucx_transport::process(ucx_reach r) { return open(r); }
void ucx_transport::retire_process_transports() {}
void ucx_transport::end_process_transports() {}

#else

namespace {

std::string status_text(ucs_status_t s) { return ucs_status_string(s); }
std::string as_key(const ucx_address& a) { return std::string(a.begin(), a.end()); }

// One posted operation: what keeps its buffer alive and whom to tell.
struct op {
  std::shared_ptr<const void> hold;
  ucx_transport::done_fn done;
  std::uint64_t tag = 0;
  void* request = nullptr;       // receives only, while pending
  std::size_t request_length = 0;  // receives only: the bytes expected
  void* owner = nullptr;           // receives only: the transport
  bool posting = false;            // receives only: inside ucp_tag_recv_nbx
  bool completed = false;          // receives only: its callback has run
};

class ucp_transport final : public ucx_transport {
 public:
  ~ucp_transport() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    if (worker_) ucp_worker_signal(worker_);
    if (thread_.joinable()) thread_.join();
    for (auto& [addr, ep] : eps_) {
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = UCP_EP_CLOSE_FLAG_FORCE;
      void* r = ucp_ep_close_nbx(ep, &p);
      if (UCS_PTR_IS_PTR(r)) {
        while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(worker_);
        ucp_request_free(r);
      }
    }
    if (address_raw_) ucp_worker_release_address(worker_, address_raw_);
    if (worker_) ucp_worker_destroy(worker_);
    if (context_) ucp_cleanup(context_);
  }

  status start(ucx_reach reach) {
    // Endpoints use peer error handling (a dead peer fails a send; it never hangs), which admits
    // only transports that detect a dead peer: shared memory does so only when asked, else one
    // host's processes would talk over TCP on lo. UCX reads this transport setting only from the
    // environment (ucp_config_modify accepts it and ignores it); a value already set wins.
    ::setenv("UCX_POSIX_ERROR_HANDLING", "y", 0);
    // UCX warns on stderr about what a lost peer leaves behind (requests not returned to their
    // pool, callbacks left in a queue); pipeworks names the lost peer itself, in one line. Errors
    // still print; UCX_LOG_LEVEL, when set, wins.
    if (std::getenv("UCX_LOG_LEVEL") == nullptr) ucs_global_opts_set_value("LOG_LEVEL", "error");
    ucp_config_t* config = nullptr;
    if (ucs_status_t s = ucp_config_read(nullptr, nullptr, &config); s != UCS_OK)
      return make_error("UCX: ucp_config_read failed: " + status_text(s));
    if (reach == ucx_reach::network) {
      if (ucs_status_t s = ucp_config_modify(config, "TLS", "tcp"); s != UCS_OK) {
        ucp_config_release(config);
        return make_error("UCX: cannot restrict a worker to TCP: " + status_text(s));
      }
    }
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
    ucs_status_t s = ucp_init(&params, config, &context_);
    ucp_config_release(config);
    if (s != UCS_OK) return make_error("UCX: ucp_init failed: " + status_text(s));
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    if (s = ucp_worker_create(context_, &wp, &worker_); s != UCS_OK)
      return make_error("UCX: ucp_worker_create failed: " + status_text(s));
    if (s = ucp_worker_get_efd(worker_, &efd_); s != UCS_OK)
      return make_error("UCX: ucp_worker_get_efd failed: " + status_text(s));
    std::size_t len = 0;
    if (s = ucp_worker_get_address(worker_, &address_raw_, &len); s != UCS_OK)
      return make_error("UCX: ucp_worker_get_address failed: " + status_text(s));
    const auto* b = reinterpret_cast<const std::uint8_t*>(address_raw_);
    address_.assign(b, b + len);
    thread_ = std::thread([this] { loop(); });
    return status::success();
  }

  const ucx_address& address() const override { return address_; }
  bool on_progress_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

  void send(const ucx_address& peer, std::uint64_t tag, const void* data, std::size_t n,
            std::shared_ptr<const void> hold, done_fn done) override {
    post([this, peer, tag, data, n, hold = std::move(hold), done = std::move(done)]() mutable {
      auto* o = new op{std::move(hold), std::move(done), tag, nullptr};
      o->owner = this;
      ucp_ep_h ep = endpoint(peer);
      if (ep == nullptr) return finish(o, "cannot reach the peer's UCX worker");
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
      p.cb.send = [](void* request, ucs_status_t st, void* user) {
        --static_cast<ucp_transport*>(static_cast<op*>(user)->owner)->sends_open_;
        finish(static_cast<op*>(user), st == UCS_OK ? "" : "UCX send: " + status_text(st));
        ucp_request_free(request);
      };
      p.user_data = o;
      void* r = ucp_tag_send_nbx(ep, data, n, tag, &p);
      if (r == nullptr) return finish(o, "");
      if (UCS_PTR_IS_ERR(r)) return finish(o, "UCX send: " + status_text(UCS_PTR_STATUS(r)));
      ++sends_open_;
    });
  }

  void prefetch(std::uint64_t mask, std::uint64_t value, std::size_t budget,
                std::chrono::milliseconds keep, early_into into) override {
    {
      // At once, so that a claim made after this returns finds it.
      std::lock_guard<std::mutex> lock(early_mu_);
      prefetcher& p = prefetchers_.emplace_back();
      p.mask = mask;
      p.value = value;
      p.budget = budget;
      p.keep = keep;
      p.into = std::move(into);
    }
    ucp_worker_signal(worker_);  // what has come already is taken in
  }

  void claim(std::uint64_t tag, std::size_t n, claim_fn done,
             std::chrono::milliseconds patience) override {
    // On the caller's thread: a tensor that is in is handed over at once (no hop through the
    // progress thread, and the caller's actor goes on with the message it rebuilds).
    const auto deadline = std::chrono::steady_clock::now() + patience;
    std::unique_lock<std::mutex> lock(early_mu_);
    prefetcher* p = prefetcher_of(tag);
    if (p == nullptr) {
      lock.unlock();
      return done(nullptr, "UCX: no prefetch receives this tag");
    }
    auto m = p->got.find(tag);
    if (m == p->got.end()) {
      claims_.push_back(claim_wait{tag, n, std::move(done), deadline});
      lock.unlock();
      ucp_worker_signal(worker_);  // the progress thread's wait must cover this deadline
      return;
    }
    if (!m->second.in) {
      m->second.claimed = std::move(done);
      m->second.claimed_n = n;
      return;
    }
    handed h = take_over(*p, m, n);
    const bool waiting = p->deferred != nullptr;  // a message waits for the budget given back
    lock.unlock();
    if (waiting) ucp_worker_signal(worker_);
    done(std::move(h.token), h.error);
  }

  void stop_prefetch(std::uint64_t mask, std::uint64_t value) override {
    on_loop([this, mask, value] {
      cancel_pending(mask, value);
      fail_claims(mask, value);
      std::vector<claim_fn> failed;
      ucp_tag_message_h deferred = nullptr;
      std::uint64_t deferred_tag = 0;
      {
        std::lock_guard<std::mutex> lock(early_mu_);
        auto p = std::find_if(prefetchers_.begin(), prefetchers_.end(),
                              [&](const prefetcher& q) { return q.mask == mask && q.value == value; });
        if (p == prefetchers_.end()) return;
        for (auto& [tag, m] : p->got)
          if (m.claimed) failed.push_back(std::exchange(m.claimed, nullptr));
        deferred = p->deferred;
        deferred_tag = p->deferred_info.sender_tag;
        prefetchers_.erase(p);
      }
      if (deferred != nullptr) drain(deferred, deferred_tag);
      for (claim_fn& f : failed) f(nullptr, "the receive was cancelled: the run ended");
    });
  }

  void set_crowded(bool crowded) override { crowded_ = crowded; }

  std::string lanes(const ucx_address& peer) const override {
    std::lock_guard<std::mutex> lock(lanes_mu_);
    auto i = lanes_.find(as_key(peer));
    return i == lanes_.end() ? "" : i->second;
  }

 private:
  static ucp_transport* self_of(op* o) { return static_cast<ucp_transport*>(o->owner); }

  static void finish(op* o, const std::string& why) {
    if (o->done) o->done(why);
    delete o;
  }

  // Runs `f` on the progress thread and returns once it has run; called on the progress thread,
  // it runs at the loop's next turn and returns at once. The progress thread may be inside UCX
  // there: a claim's or a send's callback runs inside ucp_worker_progress (or a receive's call),
  // and one that drops a wire link's last owner stops its prefetch from there. `f` progresses the
  // worker (to cancel receives), and UCX does not allow progress from inside its own callbacks.
  void on_loop(std::function<void()> f) {
    if (std::this_thread::get_id() == thread_.get_id()) return post(std::move(f));
    auto done = std::make_shared<std::promise<void>>();
    auto finished = done->get_future();
    post([f = std::move(f), done] {
      f();
      done->set_value();
    });
    finished.wait();
  }

  // Cancels the receives under way whose tag has `value` in the bits of `mask`, and progresses
  // until their callbacks have run.
  void cancel_pending(std::uint64_t mask, std::uint64_t value) {
    auto matching = [&] {
      std::vector<op*> hit;
      for (op* o : pending_)
        if ((o->tag & mask) == value) hit.push_back(o);
      return hit;
    };
    for (op* o : matching()) ucp_request_cancel(worker_, o->request);
    for (int i = 0; i < 1000 && !matching().empty(); ++i) ucp_worker_progress(worker_);
  }

  // A message received ahead of its claim.
  struct early_msg {
    std::size_t length = 0;  // the bytes that came
    std::size_t held = 0;    // the bytes it holds of its prefetch's budget
    std::shared_ptr<void> token;
    bool in = false;  // all of it has come (or it failed)
    std::string error;
    std::chrono::steady_clock::time_point since;  // when it came in, for `keep`
    claim_fn claimed;  // a claim that came before it was in
    std::size_t claimed_n = 0;
  };
  struct prefetcher {
    std::uint64_t mask = 0, value = 0;
    std::size_t budget = 0;
    std::chrono::milliseconds keep{0};
    early_into into;
    std::size_t held = 0;
    std::size_t arriving = 0;                // of those, the bytes still on their way
    std::map<std::uint64_t, early_msg> got;  // by tag
    ucp_tag_message_h deferred = nullptr;     // a message that waits for budget
    ucp_tag_recv_info_t deferred_info{};
  };
  // A claim whose message has not begun to arrive.
  struct claim_wait {
    std::uint64_t tag;
    std::size_t n;
    claim_fn done;
    std::chrono::steady_clock::time_point deadline;
  };
  static constexpr std::size_t max_early = 4096;
  // The bytes a prefetch receives at once (one message always): enough messages under way to
  // hide each one's rendezvous, few enough that large tensors do not interleave (16 MiB tensors:
  // over shared memory 9.5 GB/s with 16 or 32 MiB under way, 8.2 with 64; over TCP a median of
  // 2.7 GB/s with 16 MiB, 2.1 with 32; 1 MiB tensors alike with 16 or 32).
  static constexpr std::size_t max_arriving = std::size_t{16} << 20;

  prefetcher* prefetcher_of(std::uint64_t tag) {
    for (prefetcher& p : prefetchers_)
      if ((tag & p.mask) == p.value) return &p;
    return nullptr;
  }

  void fail_claims(std::uint64_t mask, std::uint64_t value) {
    std::vector<claim_fn> failed;
    std::unique_lock<std::mutex> lock(early_mu_);
    for (auto c = claims_.begin(); c != claims_.end();) {
      if ((c->tag & mask) == value) {
        failed.push_back(std::move(c->done));
        c = claims_.erase(c);
      } else {
        ++c;
      }
    }
    lock.unlock();
    for (claim_fn& f : failed) f(nullptr, "the receive was cancelled: the run ended");
  }

  // What a claim gets: the buffer's token, or why not.
  struct handed {
    std::shared_ptr<void> token;
    std::string error;
  };
  // Takes a message that is in from its prefetch (under early_mu_) and gives its bytes back to
  // the budget.
  static handed take_over(prefetcher& p, std::map<std::uint64_t, early_msg>::iterator m, std::size_t n) {
    early_msg got = std::move(m->second);
    p.got.erase(m);
    p.held -= got.held;
    std::string why = got.error;
    if (why.empty() && got.length != n)
      why = "UCX receive: " + std::to_string(got.length) + " bytes came, not " + std::to_string(n);
    return {why.empty() ? std::move(got.token) : nullptr, why};
  }

  // Receives a message into nothing, releasing it.
  void drain(ucp_tag_message_h msg, std::uint64_t tag) {
    static char nothing;
    start_receive(msg, &nothing, 0, tag, [](const std::string&) {});
  }

  // Starts the receive of every message a prefetch takes that has come (or announced itself),
  // while its budget allows. Returns whether any started.
  bool probe_early() {
    struct start {
      ucp_tag_message_h msg;
      std::uint64_t tag;
      void* data;  // null: received into nothing
      std::size_t n;
      std::shared_ptr<void> token;  // the buffer, kept alive by the receive until it ends
    };
    std::vector<start> starts;
    std::vector<std::pair<std::uint64_t, std::string>> refused;
    {
      std::lock_guard<std::mutex> lock(early_mu_);
      for (prefetcher& p : prefetchers_) {
        for (;;) {
          ucp_tag_recv_info_t info{};
          ucp_tag_message_h msg = p.deferred;
          if (msg != nullptr) info = p.deferred_info;
          else msg = ucp_tag_probe_nb(worker_, p.value, p.mask, 1, &info);
          if (msg == nullptr) break;
          if ((p.held > 0 && p.held + info.length > p.budget) || p.got.size() >= max_early ||
              (p.arriving > 0 && p.arriving + info.length > max_arriving)) {
            p.deferred = msg;
            p.deferred_info = info;
            break;
          }
          p.deferred = nullptr;
          const std::uint64_t tag = info.sender_tag;
          if (p.got.count(tag) != 0) {  // a tag sent twice: the first counts
            starts.push_back({msg, tag, nullptr, 0, nullptr});
            continue;
          }
          early_buffer into = p.into(info.length);
          early_msg& m = p.got[tag];
          m.length = info.length;
          for (auto c = claims_.begin(); c != claims_.end(); ++c) {
            if (c->tag != tag) continue;
            m.claimed = std::move(c->done);
            m.claimed_n = c->n;
            claims_.erase(c);
            break;
          }
          if (into.data == nullptr) {
            starts.push_back({msg, tag, nullptr, 0, nullptr});
            refused.emplace_back(tag, "UCX receive: a message of " + std::to_string(info.length) +
                                          " bytes was refused (more than this run allows?)");
            continue;
          }
          m.token = into.token;
          m.held = info.length;
          p.held += info.length;
          p.arriving += info.length;
          starts.push_back({msg, tag, into.data, info.length, std::move(into.token)});
        }
      }
    }
    // Outside the lock: a receive may complete inside the call, and its callback takes the lock.
    for (const start& st : starts) {
      if (st.data == nullptr) drain(st.msg, st.tag);
      // The receive holds the buffer too: one that cannot be cancelled (a rendezvous under way)
      // when its prefetch stops must not write into freed memory.
      else start_receive(st.msg, st.data, st.n, st.tag,
                         [this, tag = st.tag, keep = st.token](const std::string& e) { early_done(tag, e); });
    }
    for (const auto& [tag, why] : refused) early_done(tag, why);
    return !starts.empty();
  }

  // A prefetched message is in (or failed): to its claim, if one waits.
  void early_done(std::uint64_t tag, const std::string& error) {
    claim_fn done;
    handed h;
    {
      std::lock_guard<std::mutex> lock(early_mu_);
      prefetcher* p = prefetcher_of(tag);
      if (p == nullptr) return;
      auto m = p->got.find(tag);
      if (m == p->got.end() || m->second.in) return;
      p->arriving -= m->second.held;
      m->second.in = true;
      m->second.error = error;
      m->second.since = std::chrono::steady_clock::now();
      if (!m->second.claimed) return;
      done = std::exchange(m->second.claimed, nullptr);
      h = take_over(*p, m, m->second.claimed_n);
    }
    done(std::move(h.token), h.error);
  }

  // Fails the claims whose time is up and drops the prefetched messages nobody claimed in time;
  // returns when the next of those is due, at most a second from now.
  std::chrono::steady_clock::time_point expire_early(std::chrono::steady_clock::time_point now) {
    auto next = now + std::chrono::seconds(1);
    std::vector<claim_fn> late;
    std::unique_lock<std::mutex> lock(early_mu_);
    for (auto c = claims_.begin(); c != claims_.end();) {
      if (c->deadline <= now) {
        late.push_back(std::move(c->done));
        c = claims_.erase(c);
      } else {
        next = std::min(next, c->deadline);
        ++c;
      }
    }
    for (prefetcher& p : prefetchers_) {
      for (auto m = p.got.begin(); m != p.got.end();) {
        if (!m->second.in || m->second.claimed) {
          ++m;
        } else if (m->second.since + p.keep <= now) {
          p.held -= m->second.held;
          m = p.got.erase(m);
        } else {
          next = std::min(next, m->second.since + p.keep);
          ++m;
        }
      }
    }
    lock.unlock();
    for (claim_fn& f : late) f(nullptr, "no message with its tag arrived in time (UCX)");
    return next;
  }

  // Fails the claims whose time is up and drops what nobody claimed in time; returns the
  // milliseconds until the next of those is due (at most 1000).
  int expire() {
    const auto now = std::chrono::steady_clock::now();
    const auto next = expire_early(now);
    return static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count()) + 1;
  }

  void start_receive(ucp_tag_message_h msg, void* data, std::size_t n, std::uint64_t tag, done_fn done) {
    auto* o = new op{nullptr, std::move(done), tag, nullptr};
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.recv = [](void* request, ucs_status_t st, const ucp_tag_recv_info_t* info, void* user) {
      auto* me = static_cast<op*>(user);
      std::string why;
      if (st == UCS_ERR_CANCELED) why = "the receive was cancelled: the run ended";
      else if (st != UCS_OK) why = "UCX receive: " + status_text(st);
      else if (info->length != me->request_length)
        why = "UCX receive: " + std::to_string(info->length) + " bytes came, not " +
              std::to_string(me->request_length);
      self_of(me)->pending_.erase(me);
      if (me->done) me->done(why);
      me->done = nullptr;
      me->completed = true;
      ucp_request_free(request);
      if (!me->posting) delete me;  // else the poster deletes it when the call returns
    };
    p.user_data = o;
    o->request_length = n;
    o->owner = this;
    o->posting = true;
    // Completion always through the callback, which sees the length that came. It may run
    // inside the call.
    p.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    void* r = ucp_tag_msg_recv_nbx(worker_, data, n, msg, &p);
    o->posting = false;
    if (UCS_PTR_IS_ERR(r)) return finish(o, "UCX receive: " + status_text(UCS_PTR_STATUS(r)));
    if (o->completed) {
      delete o;
      return;
    }
    o->request = r;
    pending_.insert(o);
  }

  void post(std::function<void()> cmd) {
    bool asleep = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      commands_.push_back(std::move(cmd));
      asleep = asleep_;
    }
    // A loop that is awake finds the command before it sleeps (it looks under the same lock);
    // one that may sleep is woken (a signal before it arms makes the arming fail: it looks again).
    if (asleep) ucp_worker_signal(worker_);
  }

  ucp_ep_h endpoint(const ucx_address& peer) {
    const std::string key = as_key(peer);
    if (auto i = eps_.find(key); i != eps_.end()) return i->second;
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(peer.data());
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = [](void*, ucp_ep_h, ucs_status_t) {};  // sends to it fail; CAF tells who
    ep.err_handler.arg = nullptr;
    ucp_ep_h h = nullptr;
    if (ucp_ep_create(worker_, &ep, &h) != UCS_OK) return nullptr;
    eps_.emplace(key, h);
    record_lanes(peer, h);
    return h;
  }

  void record_lanes(const ucx_address& peer, ucp_ep_h h) {
    char* text = nullptr;
    std::size_t size = 0;
    FILE* f = open_memstream(&text, &size);
    if (f == nullptr) return;
    ucp_ep_print_info(h, f);
    std::fclose(f);
    std::lock_guard<std::mutex> lock(lanes_mu_);
    lanes_[as_key(peer)] = text ? std::string(text, size) : "";
    std::free(text);
  }

  void loop() {
    for (;;) {
      std::vector<std::function<void()>> todo;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) break;
        todo.swap(commands_);
      }
      for (auto& c : todo) c();
      bool moved = !todo.empty();
      while (ucp_worker_progress(worker_) != 0) moved = true;
      if (probe_early()) continue;
      const auto now = std::chrono::steady_clock::now();
      if (moved) last_moved_ = now;
      // While transfers are under way and moving, poll rather than sleep: a wake-up through the
      // event fd costs syscalls on both sides per fragment (TCP at 16 MiB: 2.3 GB/s polled, 1.8
      // slept). A transfer that stops moving (a frozen peer) no longer holds a core after 200 us,
      // and with more processes than cores it yields the core after every poll (an all-reduce of
      // 4 processes on 2 ran 6x slower when polling never yielded; yielding always cost 15% at
      // 1 MiB between 2 processes on 2 cores).
      if ((!pending_.empty() || sends_open_ > 0) && now - last_moved_ < spin_for) {
        if (crowded_.load(std::memory_order_relaxed)) sched_yield();
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) break;
        if (!commands_.empty()) continue;
        asleep_ = true;
      }
      const int wait_ms = expire();
      const ucs_status_t armed = ucp_worker_arm(worker_);
      if (armed != UCS_ERR_BUSY) {
        pollfd pfd{efd_, POLLIN, 0};
        ::poll(&pfd, 1, wait_ms);
      }
      std::lock_guard<std::mutex> lock(mu_);
      asleep_ = false;
    }
    // Whatever is still posted ends with an error: the transport goes away.
    fail_claims(0, 0);
    for (op* o : std::vector<op*>(pending_.begin(), pending_.end())) ucp_request_cancel(worker_, o->request);
    for (int i = 0; i < 100 && !pending_.empty(); ++i) ucp_worker_progress(worker_);
    std::vector<claim_fn> failed;
    {
      std::lock_guard<std::mutex> lock(early_mu_);
      for (prefetcher& p : prefetchers_)
        for (auto& [tag, m] : p.got)
          if (m.claimed) failed.push_back(std::exchange(m.claimed, nullptr));
      prefetchers_.clear();
    }
    for (claim_fn& f : failed) f(nullptr, "the receive was cancelled: the transport closed");
  }

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_address_t* address_raw_ = nullptr;
  ucx_address address_;
  int efd_ = -1;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::function<void()>> commands_;
  bool stop_ = false;
  bool asleep_ = false;  // the loop may be in (or on its way to) its wait: posts must wake it
  std::map<std::string, ucp_ep_h> eps_;  // by address bytes  // the progress thread's
  std::set<op*> pending_;                // receives under way, the progress thread's
  std::mutex early_mu_;                  // guards prefetchers_ and claims_ (claims come from any thread)
  std::list<prefetcher> prefetchers_;
  std::size_t sends_open_ = 0;  // sends under way, the progress thread's
  std::chrono::steady_clock::time_point last_moved_;  // when the loop last did work, the same
  std::atomic<bool> crowded_{false};
  static constexpr std::chrono::microseconds spin_for{200};
  std::list<claim_wait> claims_;
  mutable std::mutex lanes_mu_;
  std::map<std::string, std::string> lanes_;
};

}  // namespace

bool ucx_transport::available() { return true; }

namespace {

// The threads that end transports let go on their own progress thread; joined by
// end_process_transports (never destroyed: threads may still be added during exit).
std::mutex& reaper_mu() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::vector<std::thread>& reapers() {
  static auto* threads = new std::vector<std::thread>;
  return *threads;
}

// The process's transports (ucx_transport::process), kept until end_process_transports.
std::mutex& process_mu() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::shared_ptr<ucx_transport>* process_ones() {
  static auto* ones = new std::shared_ptr<ucx_transport>[2];
  return ones;
}

}  // namespace

result<std::shared_ptr<ucx_transport>> ucx_transport::open(ucx_reach reach) {
  // The last owner may let go inside one of the transport's own callbacks, on its progress
  // thread (a callback that held the last reference to what owns the transport): that thread
  // cannot join itself, so another thread ends the transport once the callback has returned
  // (joined by end_process_transports).
  std::shared_ptr<ucp_transport> t(new ucp_transport(), [](ucp_transport* p) {
    if (!p->on_progress_thread()) return delete p;
    std::lock_guard<std::mutex> lock(reaper_mu());
    try {
      reapers().emplace_back([p] { delete p; });
    } catch (const std::exception&) {  // no thread to be had: leave it to the process's end
    }
  });
  if (status s = t->start(reach); !s) return make_error(s.message());
  return std::shared_ptr<ucx_transport>(std::move(t));
}

result<std::shared_ptr<ucx_transport>> ucx_transport::process(ucx_reach reach) {
  std::lock_guard<std::mutex> lock(process_mu());
  auto& one = process_ones()[reach == ucx_reach::local ? 0 : 1];
  if (!one) {
    auto t = open(reach);
    if (!t) return t.err();
    one = std::move(*t);
  }
  return one;
}

void ucx_transport::retire_process_transports() {
  std::shared_ptr<ucx_transport> retired[2];
  {
    std::lock_guard<std::mutex> lock(process_mu());
    for (int k = 0; k < 2; ++k) retired[k] = std::move(process_ones()[k]);
  }
  // Ended here unless a run still holds them (then by its last owner, maybe a reaper thread).
}

void ucx_transport::end_process_transports() {
  std::shared_ptr<ucx_transport> ending[2];
  {
    std::lock_guard<std::mutex> lock(process_mu());
    for (int k = 0; k < 2; ++k) ending[k] = std::move(process_ones()[k]);
  }
  for (auto& t : ending) t.reset();  // here, on this thread, unless a run still holds one
  for (;;) {
    std::vector<std::thread> done;
    {
      std::lock_guard<std::mutex> lock(reaper_mu());
      done.swap(reapers());
    }
    if (done.empty()) return;
    for (std::thread& t : done) t.join();
  }
}

#endif

}  // namespace pipeworks
