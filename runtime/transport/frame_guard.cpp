// The frame guard's relay: one thread polls the listener and every connection pair. Inbound
// bytes are read as BASP frames (a 32-byte header whose payload length is a big-endian u32 at
// offset 4, then the payload); a frame goes to CAF only once whole, and a header claiming more
// than the bound, or more than the guard may hold now, closes the connection; or, once the peer
// has handshaken, stops the inbound bytes there and tells the process what was refused (the
// connection stays open outbound, so the peer hears why). Outbound bytes pass as they are. A side that cannot take more stops the reading of the other (bounded buffers).
#include "runtime/transport/frame_guard.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <list>
#include <vector>

namespace pipeworks {

namespace {

constexpr std::size_t basp_header = 32;
// BASP's message types (caf/io/basp/message_type.hpp, 0.17.6).
constexpr unsigned char client_handshake = 0x01, heartbeat = 0x06;
constexpr std::size_t read_chunk = 1 << 16;

void nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }
void nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Bytes waiting to be written, written from `done` on.
struct outbox {
  std::string bytes;
  std::size_t done = 0;
  bool empty() const { return done == bytes.size(); }
  void add(const char* p, std::size_t n) {
    if (empty()) {
      bytes.clear();
      done = 0;
    }
    bytes.append(p, n);
  }
  // Writes what it can; false when the socket failed.
  bool flush(int fd) {
    while (!empty()) {
      const ssize_t w = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (w < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      done += static_cast<std::size_t>(w);
    }
    bytes.clear();
    bytes.shrink_to_fit();
    done = 0;
    return true;
  }
};

struct relay {
  int outer = -1, inner = -1;
  outbox to_inner, to_outer;
  std::string frame;          // the inbound frame being received
  std::uint64_t frame_size = 0;  // header + payload, once the header is in
  std::string peer;
  std::uint64_t frames = 0;      // inbound frames so far
  std::chrono::steady_clock::time_point since{};  // accepted then
  bool greeted = false;          // its first frame (the handshake) has gone through whole
  // After a refused frame nothing more goes inbound; the first bytes of its payload, which name
  // what it held, are kept until the refusal is reported.
  bool refusing = false, reported = false;
  unsigned char refused_op = 0;
  std::string head;
  std::size_t head_want = 0;
  frame_guard::refusal refused;
  std::chrono::steady_clock::time_point refused_at{};
};

// What a refused frame held, from its BASP kind and the first bytes of its payload. CAF 0.17.6
// writes a message's types early in a message frame's payload as one string, "@<>" then "+" and
// each type's name, after its length in one byte (names shorter than 128 bytes).
std::string frame_kind(unsigned char op, const std::string& head) {
  if (op == 2 || op == 3) {
    const auto at = head.find("@<>");
    if (at != std::string::npos && at > 0) {
      const auto n = static_cast<unsigned char>(head[at - 1]);
      if (n > 3 && n < 128 && at + n <= head.size()) {
        std::string names = head.substr(at + 4, n - 4);
        bool printable = !names.empty();
        for (char& c : names) {
          if (c < 0x21 || c > 0x7e) printable = false;
          if (c == '+') c = ',';
        }
        if (printable) return "a CAF message of type " + names;
      }
    }
    return "a CAF message";
  }
  if (op == 4) return "a CAF monitor request";
  if (op == 5) return "a CAF down message";
  return "a BASP frame of kind " + std::to_string(op);
}

}  // namespace

result<std::unique_ptr<frame_guard>> frame_guard::start(const host_port& at, std::uint16_t inner_port,
                                                       limits lim,
                                                       std::function<void(const std::string&)> log,
                                                       std::function<void(const refusal&)> on_refused) {
  std::unique_ptr<frame_guard> g(new frame_guard());
  g->inner_port_ = inner_port;
  g->lim_ = lim;
  g->log_ = std::move(log);
  g->on_refused_ = std::move(on_refused);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(at.port);
  if (int e = ::getaddrinfo(at.host.c_str(), port.c_str(), &hints, &found); e != 0)
    return make_error("cannot listen on " + to_string(at) + ": " + ::gai_strerror(e));
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr && g->listener_ < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 64) == 0) {
      g->listener_ = fd;
      sockaddr_storage bound{};
      socklen_t len = sizeof bound;
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
      g->port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                   : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    } else {
      why = std::strerror(errno);
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  if (g->listener_ < 0) return make_error("cannot listen on " + to_string(at) + ": " + why);
  nonblocking(g->listener_);
  if (::pipe(g->wake_) != 0) return make_error("cannot make the guard's wake-up pipe");
  g->thread_ = std::thread([p = g.get()] { p->loop(); });
  return g;
}

void frame_guard::close_refused() {
  close_refused_ = true;
  const char c = 0;
  [[maybe_unused]] ssize_t w = ::write(wake_[1], &c, 1);
}

frame_guard::~frame_guard() {
  stop_ = true;
  if (wake_[1] >= 0) {
    const char c = 0;
    [[maybe_unused]] ssize_t w = ::write(wake_[1], &c, 1);
  }
  if (thread_.joinable()) thread_.join();
  for (int fd : {listener_, wake_[0], wake_[1]})
    if (fd >= 0) ::close(fd);
}

void frame_guard::loop() {
  std::list<relay> relays;
  std::uint64_t held = 0;  // payload bytes of frames being received, all connections
  auto report = [&](relay& r) {
    r.reported = true;
    r.refused.kind = frame_kind(r.refused_op, r.head);
    on_refused_(r.refused);
  };
  // Refuses the frame being received on a connection that had handshaken: `payload` is what of it
  // came, `why` what the log says. Nothing more goes inbound on it.
  auto refuse = [&](relay& r, const std::string& why, std::uint64_t limit, bool all, std::uint64_t need) {
    const std::uint64_t len = r.frame_size > 0 ? r.frame_size - basp_header : 0;
    r.refusing = true;
    r.refused_op = static_cast<unsigned char>(r.frame[0]);
    std::uint64_t to = 0;  // big-endian at offset 24, as CAF writes it
    for (std::size_t b = 24; b < basp_header; ++b) to = to << 8 | static_cast<unsigned char>(r.frame[b]);
    r.refused = refusal{r.peer, "", len, limit, all, need, to};
    r.head_want = static_cast<std::size_t>(std::min<std::uint64_t>(len, 512));
    r.head = r.frame.substr(basp_header, r.head_want);
    r.refused_at = std::chrono::steady_clock::now();
    r.frame.clear();
    r.frame.shrink_to_fit();
    r.frame_size = 0;
    if (log_) log_("refused a frame from " + r.peer + ": " + why + "; the connection passes nothing more on");
  };
  auto close_relay = [&](std::list<relay>::iterator r, const std::string& why) {
    if (r->frame.size() > basp_header) held -= r->frame.size() - basp_header;
    if (why.empty()) {  // an orderly end: what each side sent last still reaches the other
      timeval limit{1, 0};
      for (int fd : {r->inner, r->outer}) {
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
      }
      r->to_inner.flush(r->inner);
      r->to_outer.flush(r->outer);
    }
    if (r->refusing && !r->reported) report(*r);
    if (!why.empty() && log_) log_("refused the connection from " + r->peer + ": " + why);
    ::close(r->outer);
    ::close(r->inner);
    return relays.erase(r);
  };
  // Takes inbound bytes into the frame being received; a whole frame goes to CAF. "" or why the
  // connection must close.
  auto take = [&](relay& r, const char* p, std::size_t n) -> std::string {
    while (n > 0) {
      if (r.refusing) {  // the refused frame's first bytes are kept; the rest goes nowhere
        r.head.append(p, std::min(n, r.head_want - std::min(r.head_want, r.head.size())));
        break;
      }
      if (r.frame.size() < basp_header) {
        const std::size_t k = std::min(n, basp_header - r.frame.size());
        r.frame.append(p, k);
        p += k;
        n -= k;
        if (r.frame.size() < basp_header) break;
        std::uint32_t len = 0;
        std::memcpy(&len, r.frame.data() + 4, 4);
        len = ntohl(len);
        const auto kind = static_cast<unsigned char>(r.frame[0]);
        const bool message = kind >= 2 && kind <= 5;  // a message, a monitor or a down message
        if (len > lim_.max_frame) {
          const std::string why = "a frame claims " + std::to_string(len) + " bytes, more than the " +
                                  std::to_string(lim_.max_frame) + " a frame may hold";
          if (!r.greeted || !message || !on_refused_) return why;
          r.frame_size = basp_header + len;
          refuse(r, why, lim_.max_frame, false, len);
          continue;
        }
        // BASP's order and shapes, which CAF 0.17.6 trusts: a connection opens with the client's
        // handshake (which a client repeats), then messages (2..5) and heartbeats (6), never a
        // server's handshake; every frame but a heartbeat has a payload (CAF reads the payload of
        // an empty handshake or message through a null pointer).
        const auto op = static_cast<unsigned char>(r.frame[0]);
        const bool first = r.frames == 0;
        if (first ? op != client_handshake : op < client_handshake || op > heartbeat)
          return "a frame of kind " + std::to_string(op) + (first ? " opens the connection" : " follows the handshake");
        if ((op == heartbeat) != (len == 0))
          return "a frame of kind " + std::to_string(op) + " with " + std::to_string(len) + " bytes of payload";
        ++r.frames;
        r.frame_size = basp_header + len;
      } else {
        const std::size_t k = std::min<std::uint64_t>(n, r.frame_size - r.frame.size());
        if (held + k > lim_.max_held) {
          const std::string why = "frames being received would hold more than " +
                                  std::to_string(lim_.max_held) + " bytes";
          if (!r.greeted || !on_refused_) return why;
          held -= r.frame.size() - basp_header;
          refuse(r, why, lim_.max_held, true, held + (r.frame_size - basp_header));
          continue;
        }
        r.frame.append(p, k);
        held += k;
        p += k;
        n -= k;
      }
      if (r.frame.size() == r.frame_size) {
        held -= r.frame_size - basp_header;
        r.to_inner.add(r.frame.data(), r.frame.size());
        r.greeted = true;
        r.frame.clear();
        r.frame.shrink_to_fit();
        r.frame_size = 0;
      }
    }
    return "";
  };
  std::vector<char> buf(read_chunk);
  std::vector<pollfd> fds;
  while (!stop_) {
    fds.clear();
    fds.push_back({wake_[0], POLLIN, 0});
    fds.push_back({listener_, static_cast<short>(static_cast<int>(relays.size()) < lim_.max_connections ? POLLIN : 0), 0});
    for (relay& r : relays) {
      fds.push_back({r.outer, static_cast<short>((r.to_inner.empty() ? POLLIN : 0) | (r.to_outer.empty() ? 0 : POLLOUT)), 0});
      fds.push_back({r.inner, static_cast<short>((r.to_outer.empty() ? POLLIN : 0) | (r.to_inner.empty() ? 0 : POLLOUT)), 0});
    }
    if (::poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR) break;
    if (fds[0].revents) {
      if (stop_) break;
      char drain[64];
      [[maybe_unused]] ssize_t d = ::read(wake_[0], drain, sizeof drain);
    }
    // fds[2 + 2k] and fds[3 + 2k] are the polled events of the list's k-th relay, for the first
    // `polled` relays: one accepted below is polled from the next round on, and relays are
    // closed on request only after this round's events have been read.
    const std::size_t polled = relays.size();
    if (fds[1].revents & POLLIN) {
      sockaddr_storage from{};
      socklen_t len = sizeof from;
      const int outer = ::accept(listener_, reinterpret_cast<sockaddr*>(&from), &len);
      if (outer >= 0) {
        char host[NI_MAXHOST] = "?", serv[NI_MAXSERV] = "?";
        ::getnameinfo(reinterpret_cast<sockaddr*>(&from), len, host, sizeof host, serv, sizeof serv,
                      NI_NUMERICHOST | NI_NUMERICSERV);
        const int inner = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = htons(inner_port_);
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (inner >= 0 && ::connect(inner, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0) {
          nonblocking(outer);
          nonblocking(inner);
          nodelay(outer);
          nodelay(inner);
          relay r;
          r.outer = outer;
          r.inner = inner;
          r.peer = std::string(host) + ":" + serv;
          r.since = std::chrono::steady_clock::now();
          relays.push_back(std::move(r));
        } else {
          if (inner >= 0) ::close(inner);
          ::close(outer);
        }
      }
    }
    auto r = relays.begin();
    for (std::size_t k = 0, i = 2; k < polled; ++k, i += 2) {
      const short out_ev = fds[i].revents, in_ev = fds[i + 1].revents;
      std::string why;
      bool closed = false;
      if (out_ev & (POLLIN | POLLHUP | POLLERR)) {
        const ssize_t n = ::recv(r->outer, buf.data(), buf.size(), 0);
        if (n > 0) why = take(*r, buf.data(), static_cast<std::size_t>(n));
        else if (n == 0 || (errno != EAGAIN && errno != EINTR)) closed = true;
      }
      if (!closed && why.empty() && r->refusing && !r->reported && r->head.size() >= r->head_want)
        report(*r);
      if (!closed && why.empty() && (in_ev & (POLLIN | POLLHUP | POLLERR))) {
        const ssize_t n = ::recv(r->inner, buf.data(), buf.size(), 0);
        if (n > 0) r->to_outer.add(buf.data(), static_cast<std::size_t>(n));
        else if (n == 0 || (errno != EAGAIN && errno != EINTR)) closed = true;
      }
      if (!closed && why.empty() && (!r->to_inner.flush(r->inner) || !r->to_outer.flush(r->outer)))
        closed = true;
      // A connection that holds a slot without handshaking (slots are bounded) is let go.
      if (!closed && why.empty() && !r->greeted &&
          std::chrono::steady_clock::now() - r->since > std::chrono::milliseconds(lim_.handshake_ms))
        why = "no handshake within " + std::to_string(lim_.handshake_ms) + " ms of connecting";
      if (!closed && why.empty() && r->refusing &&
          std::chrono::steady_clock::now() - r->refused_at > std::chrono::milliseconds(lim_.refused_linger_ms))
        why = "its frame was refused " + std::to_string(lim_.refused_linger_ms) + " ms ago";
      if (closed || !why.empty()) r = close_relay(r, why);
      else ++r;
    }
    if (close_refused_.exchange(false))
      for (auto q = relays.begin(); q != relays.end();) q = q->refusing ? close_relay(q, "") : std::next(q);
  }
  for (auto r = relays.begin(); r != relays.end();) r = close_relay(r, "");
}

}  // namespace pipeworks
