// rank_state <-> safetensors: tensors written from where they live (no copies), a JSON metadata
// entry that says what each "pipeworks.*" tensor is, and a strict reader.
#include "runtime/checkpoint/rank_file.hpp"
#include "base/input_file.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "base/json_read.hpp"
#include "base/sha256.hpp"

namespace pipeworks {
namespace {

using json = nlohmann::json;
constexpr const char* state_key = "pipeworks.rank_state";

// A whole number the writer wrote, as an I (int, std::int64_t or std::size_t). get<I>() would
// convert a fraction or an exponent (undefined behaviour outside I's range, 1e10 for an int) and
// wrap a wide integer; this refuses them with a json::type_error naming `what`, which the reader
// catches with the rest.
template <class I>
I whole(const json& v, const std::string& what) {
  if (v.is_number_unsigned() && std::in_range<I>(v.get<std::uint64_t>()))
    return static_cast<I>(v.get<std::uint64_t>());
  if (v.is_number_integer() && !v.is_number_unsigned() && std::in_range<I>(v.get<std::int64_t>()))
    return static_cast<I>(v.get<std::int64_t>());
  throw json::type_error::create(
      302,
      what + " must be a whole number in " + std::to_string(std::numeric_limits<I>::min()) +
          ".." + std::to_string(std::numeric_limits<I>::max()) + ", not " +
          (v.is_number() ? v.dump() : std::string(v.type_name())),
      &v);
}
template <class I>
I whole_at(const json& j, const char* key) {
  return whole<I>(j.at(key), "\"" + std::string(key) + "\"");
}
template <class I>
std::vector<I> wholes_at(const json& j, const char* key) {
  const json& a = j.at(key);
  const std::string what = "\"" + std::string(key) + "\"";
  if (!a.is_array())
    throw json::type_error::create(302, what + " must be an array, not " + a.type_name(), &a);
  std::vector<I> out;
  for (const json& v : a) out.push_back(whole<I>(v, what + "'s entries"));
  return out;
}

std::string held_prefix(int stage, int mb) {
  return "pipeworks.held." + std::to_string(stage) + "." + std::to_string(mb) + "/";
}

// Collects the entries to write; the tensors stay where they are.
struct writer {
  std::vector<safetensors_entry> entries;
  std::vector<tensor> owned;  // small tensors made here (losses)

  void add(std::string name, const tensor& t) {
    if (!t.empty()) entries.push_back(entry_of(std::move(name), t));
  }
  void add(std::string name, const tensor_payload& p) {
    if (p.empty()) return;
    entries.push_back(safetensors_entry{std::move(name), p.shape(), p.type(), p.bytes().data(), p.nbytes()});
  }
  void add_params(const std::string& prefix, const param_set& p) {
    const std::byte* base = p.arena().bytes();
    const std::size_t size = dtype_size(p.type());
    for (const param_entry& e : p.entries())
      entries.push_back(safetensors_entry{prefix + e.name, e.shape, p.type(),
                                          base + static_cast<std::size_t>(e.offset) * size,
                                          static_cast<std::size_t>(e.numel()) * size});
  }
};

json activation_json(const activation_msg& a) {
  return {{"replica", a.replica}, {"stage", a.stage}, {"microbatch", a.microbatch},
          {"version", a.version}, {"batch", a.ctx.batch}, {"targets", a.ctx.targets != nullptr},
          {"data", !a.data.empty()}};
}

}  // namespace

result<written_file> write_rank_file(const std::string& path, const rank_state& s,
                                     const metadata_map& identity) {
  writer w;
  json meta = {{"rank", s.rank}, {"step", s.step}, {"pc", s.pc}};
  json stages = json::array();
  for (const stage_state& st : s.stages) {
    json versions = json::array();
    for (const auto& [v, snap] : st.versions) {
      if (!snap) return make_error("cannot write " + path + ": stage " + std::to_string(st.stage) +
                                   " has an empty version " + std::to_string(v));
      versions.push_back(v);
      w.add_params(v == st.latest ? "" : "pipeworks.version." + std::to_string(v) + "/", *snap);
    }
    const param_set& layout = *st.versions.at(st.latest);
    for (std::size_t e = 0; e < st.moment1.size(); ++e) {
      const std::string& name = layout.entries().at(e).name;
      w.add("pipeworks.optim.m/" + name, st.moment1[e]);
      w.add("pipeworks.optim.v/" + name, st.moment2[e]);
    }
    if (st.grads) w.add_params("pipeworks.grad/", *st.grads);
    json has_m = json::array(), has_v = json::array();
    for (std::size_t e = 0; e < st.moment1.size(); ++e) {
      has_m.push_back(!st.moment1[e].empty());
      has_v.push_back(!st.moment2[e].empty());
    }
    stages.push_back({{"stage", st.stage}, {"latest", st.latest},
                      {"forwards_done", st.forwards_done}, {"versions", versions},
                      {"updates", st.updates}, {"moment1", has_m}, {"moment2", has_v},
                      {"grads", st.grads.has_value()}});
  }
  meta["stages"] = stages;
  json held = json::array();
  for (const held_state& h : s.held) {
    const std::string pre = held_prefix(h.stage, h.microbatch);
    json saved = json::array(), later = json::array();
    for (std::size_t b = 0; b < h.saved.size(); ++b) {
      saved.push_back(h.saved[b].size());
      for (std::size_t i = 0; i < h.saved[b].size(); ++i)
        w.add(pre + "saved." + std::to_string(b) + "." + std::to_string(i), h.saved[b][i]);
    }
    for (std::size_t b = 0; b < h.later.size(); ++b) {
      later.push_back(h.later[b].size());
      for (std::size_t i = 0; i < h.later[b].size(); ++i)
        w.add(pre + "later." + std::to_string(b) + "." + std::to_string(i), h.later[b][i]);
    }
    if (h.targets) w.add(pre + "targets", *h.targets);
    w.add(pre + "input", h.input);
    held.push_back({{"stage", h.stage}, {"microbatch", h.microbatch}, {"version", h.version},
                    {"bytes", h.bytes}, {"deferred", h.deferred}, {"batch", h.batch},
                    {"targets", h.targets != nullptr}, {"input", !h.input.empty()},
                    {"saved", saved}, {"later", later}});
  }
  meta["held"] = held;
  json send_f = json::array(), send_b = json::array(), deliver = json::array();
  for (std::size_t i = 0; i < s.to_send_f.size(); ++i) {
    const activation_msg& a = s.to_send_f[i];
    const std::string pre = "pipeworks.send_f." + std::to_string(i) + "/";
    w.add(pre + "data", a.data);
    if (a.ctx.targets) w.add(pre + "targets", *a.ctx.targets);
    send_f.push_back(activation_json(a));
  }
  for (std::size_t i = 0; i < s.to_send_b.size(); ++i) {
    const gradient_msg& g = s.to_send_b[i];
    w.add("pipeworks.send_b." + std::to_string(i) + "/data", g.data);
    send_b.push_back({{"replica", g.replica}, {"stage", g.stage}, {"microbatch", g.microbatch}});
  }
  for (std::size_t i = 0; i < s.deliver.size(); ++i) {
    const std::string pre = "pipeworks.deliver." + std::to_string(i) + "/";
    if (auto* a = std::get_if<activation_msg>(&s.deliver[i])) {
      w.add(pre + "data", a->data);
      if (a->ctx.targets) w.add(pre + "targets", *a->ctx.targets);
      json j = activation_json(*a);
      j["kind"] = "activation";
      deliver.push_back(j);
    } else if (auto* g = std::get_if<gradient_msg>(&s.deliver[i])) {
      w.add(pre + "data", g->data);
      deliver.push_back({{"kind", "gradient"}, {"replica", g->replica}, {"stage", g->stage},
                         {"microbatch", g->microbatch}});
    } else if (auto* c = std::get_if<credit_msg>(&s.deliver[i])) {
      deliver.push_back({{"kind", "credit"}, {"replica", c->replica}, {"stage", c->stage},
                         {"forward", c->forward}});
    } else {
      return make_error("cannot write " + path + ": a message of kind " +
                        std::to_string(s.deliver[i].index()) + " to deliver again");
    }
  }
  meta["send_f"] = send_f;
  meta["send_b"] = send_b;
  meta["deliver"] = deliver;
  json credits = json::array();
  for (const auto& [key, n] : s.credits) credits.push_back({key.first, key.second, n});
  meta["credits"] = credits;
  json losses = json::array();
  if (!s.losses.empty()) {
    tensor values({static_cast<std::int64_t>(s.losses.size())}, dtype::f64);
    for (std::size_t i = 0; i < s.losses.size(); ++i) {
      values.data<double>()[i] = s.losses[i].loss;
      losses.push_back({s.losses[i].replica, s.losses[i].microbatch});
    }
    w.owned.push_back(std::move(values));
    w.add("pipeworks.losses", w.owned.back());
  }
  meta["losses"] = losses;
  metadata_map md = identity;
  md[state_key] = meta.dump();
  return write_safetensors(path, w.entries, md);
}

namespace {

// Reads what write_rank_file wrote, checking every field and tensor against the layout.
template <class T>
class reader {
 public:
  reader(const safetensors_file& f, const model<T>& m, const std::vector<int>& b)
      : f_(f), m_(m), b_(b) {}

  result<rank_state> read() {
    auto it = f_.metadata.find(state_key);
    if (it == f_.metadata.end())
      return fail("has no \"" + std::string(state_key) + "\" metadata: it is not a pipeworks rank checkpoint");
    auto parsed = parse_json(it->second, f_.source + " (" + state_key + ")");
    if (!parsed) return parsed.err();
    const json& j = *parsed;
    rank_state s;
    try {
      s.rank = whole_at<int>(j, "rank");
      s.step = whole_at<std::int64_t>(j, "step");
      s.pc = whole_at<std::int64_t>(j, "pc");
      for (const json& st : j.at("stages")) {
        auto one = read_stage(st);
        if (!one) return one.err();
        s.stages.push_back(std::move(*one));
      }
      for (const json& h : j.at("held")) {
        auto one = read_held(h);
        if (!one) return one.err();
        s.held.push_back(std::move(*one));
      }
      const json& send_f = j.at("send_f");
      for (std::size_t i = 0; i < send_f.size(); ++i) {
        auto a = read_activation(send_f[i], "pipeworks.send_f." + std::to_string(i) + "/");
        if (!a) return a.err();
        s.to_send_f.push_back(std::move(*a));
      }
      const json& send_b = j.at("send_b");
      for (std::size_t i = 0; i < send_b.size(); ++i) {
        auto data = payload("pipeworks.send_b." + std::to_string(i) + "/data");
        if (!data) return data.err();
        s.to_send_b.push_back(gradient_msg{whole_at<int>(send_b[i], "replica"),
                                           whole_at<int>(send_b[i], "stage"),
                                           whole_at<int>(send_b[i], "microbatch"), std::move(*data)});
      }
      const json& deliver = j.at("deliver");
      for (std::size_t i = 0; i < deliver.size(); ++i) {
        const json& d = deliver[i];
        const std::string pre = "pipeworks.deliver." + std::to_string(i) + "/";
        const std::string kind = d.at("kind").get<std::string>();
        if (kind == "activation") {
          auto a = read_activation(d, pre);
          if (!a) return a.err();
          s.deliver.emplace_back(std::move(*a));
        } else if (kind == "gradient") {
          auto data = payload(pre + "data");
          if (!data) return data.err();
          s.deliver.emplace_back(gradient_msg{whole_at<int>(d, "replica"), whole_at<int>(d, "stage"),
                                              whole_at<int>(d, "microbatch"), std::move(*data)});
        } else if (kind == "credit") {
          s.deliver.emplace_back(credit_msg{whole_at<int>(d, "replica"), whole_at<int>(d, "stage"),
                                            d.at("forward").get<bool>()});
        } else {
          return fail("deliver[" + std::to_string(i) + "].kind \"" + kind + "\" is unknown");
        }
      }
      for (const json& c : j.at("credits"))
        s.credits[{whole<int>(c.at(0), "a credit's stage"), c.at(1).get<bool>()}] =
            whole<int>(c.at(2), "a credit count");
      const json& losses = j.at("losses");
      if (!losses.empty()) {
        auto values = tensor_of("pipeworks.losses", dtype::f64, {static_cast<std::int64_t>(losses.size())});
        if (!values) return values.err();
        for (std::size_t i = 0; i < losses.size(); ++i)
          s.losses.push_back(loss_report{whole<int>(losses[i].at(0), "a loss's replica"),
                                         whole<int>(losses[i].at(1), "a loss's microbatch"),
                                         values->template data<double>()[i]});
      }
    } catch (const json::exception& e) {
      return fail("metadata \"" + std::string(state_key) + "\" is not what pipeworks writes: " + e.what());
    }
    return s;
  }

 private:
  error fail(const std::string& why) const { return make_error(f_.source + ": " + why); }

  // The tensor `name`, which must have this dtype and shape.
  result<tensor> tensor_of(const std::string& name, dtype dt, const shape_t& shape) const {
    const safetensors_info* info = f_.find(name);
    if (!info) return fail("tensor " + name + " is missing");
    if (info->type != dt || info->shape != shape)
      return fail("tensor " + name + " is " + std::string(dtype_name(info->type)) + " " +
                  shape_string(info->shape) + ", expected " + std::string(dtype_name(dt)) + " " +
                  shape_string(shape));
    auto bytes = f_.bytes_of(*info);
    tensor t(shape, dt);
    if (!bytes.empty()) std::memcpy(t.bytes(), bytes.data(), bytes.size());
    return t;
  }
  // Any tensor `name`, as it is.
  result<tensor> any_tensor(const std::string& name) const {
    auto t = f_.get(name);
    if (!t) return fail(t.message());
    return t;
  }
  result<tensor_payload> payload(const std::string& name) const {
    auto t = any_tensor(name);
    if (!t) return t.err();
    return tensor_payload(std::move(*t));
  }
  // The stage's layout filled from tensors prefix + each name.
  result<param_set> params(int stage, const std::string& prefix) const {
    // The boundaries cut the model into its stages; a virtual stage past them is a copy of stage
    // (stage mod that count) on a schedule's second route (dualpipe, at most 2). Whether the rank
    // runs that stage at all the executor checks against its program when it takes the state.
    const int pieces = static_cast<int>(b_.size()) - 1;
    if (stage < 0 || pieces < 1 || stage >= 2 * pieces)
      return fail("stage " + std::to_string(stage) + " is not one of the run's " +
                  std::to_string(std::max(pieces, 0)) + " stages (or their copies on a second route)");
    const int piece = stage % pieces;
    param_set p = m_.make_params(b_[piece], b_[piece + 1]);
    const std::size_t size = dtype_size(p.type());
    for (const param_entry& e : p.entries()) {
      auto t = tensor_of(prefix + e.name, p.type(), e.shape);
      if (!t) return t.err();
      std::memcpy(p.arena().bytes() + static_cast<std::size_t>(e.offset) * size, t->bytes(), t->nbytes());
    }
    return p;
  }

  result<stage_state> read_stage(const json& j) const {
    stage_state st;
    st.stage = whole_at<int>(j, "stage");
    st.latest = whole_at<int>(j, "latest");
    st.forwards_done = whole_at<std::int64_t>(j, "forwards_done");
    for (const json& v : j.at("versions")) {
      const int version = whole<int>(v, "a version");
      auto p = params(st.stage, version == st.latest ? "" : "pipeworks.version." + std::to_string(version) + "/");
      if (!p) return p.err();
      st.versions[version] = std::make_shared<const param_set>(std::move(*p));
    }
    if (!st.versions.count(st.latest))
      return fail("stage " + std::to_string(st.stage) + " lists no latest version " + std::to_string(st.latest));
    const param_set& layout = *st.versions.at(st.latest);
    st.updates = wholes_at<std::int64_t>(j, "updates");
    const auto has_m = j.at("moment1").get<std::vector<bool>>();
    const auto has_v = j.at("moment2").get<std::vector<bool>>();
    if (st.updates.size() != layout.entries().size() || has_m.size() != st.updates.size() ||
        has_v.size() != st.updates.size())
      return fail("stage " + std::to_string(st.stage) + "'s optimizer state covers " +
                  std::to_string(st.updates.size()) + " tensors, the stage has " +
                  std::to_string(layout.entries().size()));
    for (std::size_t e = 0; e < st.updates.size(); ++e) {
      const param_entry& pe = layout.entries()[e];
      for (int which : {1, 2}) {
        tensor t;
        if ((which == 1 ? has_m : has_v)[e]) {
          auto r = tensor_of(std::string(which == 1 ? "pipeworks.optim.m/" : "pipeworks.optim.v/") + pe.name,
                             layout.type(), {pe.numel()});
          if (!r) return r.err();
          t = std::move(*r);
        }
        (which == 1 ? st.moment1 : st.moment2).push_back(std::move(t));
      }
    }
    if (j.at("grads").get<bool>()) {
      auto g = params(st.stage, "pipeworks.grad/");
      if (!g) return g.err();
      st.grads = std::move(*g);
    }
    return st;
  }

  result<held_state> read_held(const json& j) const {
    held_state h;
    h.stage = whole_at<int>(j, "stage");
    h.microbatch = whole_at<int>(j, "microbatch");
    h.version = whole_at<int>(j, "version");
    h.bytes = whole_at<std::int64_t>(j, "bytes");
    h.deferred = j.at("deferred").get<bool>();
    h.batch = whole_at<std::int64_t>(j, "batch");
    const std::string pre = held_prefix(h.stage, h.microbatch);
    for (const char* part : {"saved", "later"}) {
      const auto counts = wholes_at<std::size_t>(j, part);
      auto& blocks = std::string(part) == "saved" ? h.saved : h.later;
      for (std::size_t b = 0; b < counts.size(); ++b) {
        blocks.emplace_back();
        for (std::size_t i = 0; i < counts[b]; ++i) {
          auto t = any_tensor(pre + part + "." + std::to_string(b) + "." + std::to_string(i));
          if (!t) return t.err();
          blocks.back().push_back(std::move(*t));
        }
      }
    }
    if (j.at("targets").get<bool>()) {
      auto t = any_tensor(pre + "targets");
      if (!t) return t.err();
      h.targets = std::make_shared<const tensor>(std::move(*t));
    }
    if (j.at("input").get<bool>()) {
      auto t = any_tensor(pre + "input");
      if (!t) return t.err();
      h.input = std::move(*t);
    }
    return h;
  }

  result<activation_msg> read_activation(const json& j, const std::string& pre) const {
    activation_msg a;
    a.replica = whole_at<int>(j, "replica");
    a.stage = whole_at<int>(j, "stage");
    a.microbatch = whole_at<int>(j, "microbatch");
    a.version = whole_at<int>(j, "version");
    a.ctx.batch = whole_at<std::int64_t>(j, "batch");
    if (j.at("data").get<bool>()) {
      auto d = payload(pre + "data");
      if (!d) return d.err();
      a.data = std::move(*d);
    }
    if (j.at("targets").get<bool>()) {
      auto t = any_tensor(pre + "targets");
      if (!t) return t.err();
      a.ctx.targets = std::make_shared<const tensor>(std::move(*t));
    }
    return a;
  }

  const safetensors_file& f_;
  const model<T>& m_;
  const std::vector<int>& b_;
};

}  // namespace

template <class T>
result<rank_state> parse_rank_file(const safetensors_file& file, const model<T>& m,
                                   const std::vector<int>& boundaries) {
  return reader<T>(file, m, boundaries).read();
}

template <class T>
result<rank_state> read_rank_file(const std::string& path, const model<T>& m,
                                  const std::vector<int>& boundaries) {
  auto file = read_safetensors(path);
  if (!file) return file.err();
  return parse_rank_file(*file, m, boundaries);
}

template <class T>
result<rank_state> load_rank_checkpoint(const std::string& dir, const checkpoint_file& file,
                                        const model<T>& m, const std::vector<int>& boundaries,
                                        const metadata_map& identity, std::int64_t step) {
  const std::string path = (std::filesystem::path(file_dir(file, dir)) / file.path).string();
  if (status s = check_input_file(path, "checkpoint file"); !s && std::filesystem::exists(path))
    return make_error(s.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (!file.dir.empty()) return make_error(verify_file(file, dir).message());  // names its host
    return make_error("cannot read the checkpoint file " + path);
  }
  std::vector<std::byte> buffer(file.bytes + 1);
  in.read(reinterpret_cast<char*>(buffer.data()), static_cast<std::streamsize>(buffer.size()));
  const auto got = static_cast<std::uint64_t>(in.gcount());
  if (got != file.bytes)
    return make_error(path + ": " + (got > file.bytes ? "more than" : "only") + " " +
                      std::to_string(std::min(got, file.bytes)) + " bytes, the manifest records " +
                      std::to_string(file.bytes) + "; the file is not the one the checkpoint wrote");
  buffer.resize(got);
  sha256 hash;
  hash.update(buffer);
  const std::string digest = hash.hex_digest();
  if (digest != file.sha256)
    return make_error(path + ": sha256 is " + digest + ", the manifest records " + file.sha256 +
                      "; the file is corrupt or was changed after the checkpoint was written");
  auto parsed = parse_safetensors(std::move(buffer), path);
  if (!parsed) return parsed.err();
  for (const auto& [key, want] : identity) {
    auto it = parsed->metadata.find(key);
    const std::string has = it == parsed->metadata.end() ? "nothing" : it->second;
    if (has != want)
      return make_error(path + ": its metadata " + key + " is " + has + ", but the manifest's plan " +
                        "says " + want + "; the manifest and the files are of different runs");
  }
  auto state = parse_rank_file(*parsed, m, boundaries);
  if (state && step >= 0 && state->step != step)
    return make_error(path + " is a rank file of step " + std::to_string(state->step) +
                      ", but the checkpoint resumed is of step " + std::to_string(step) +
                      ": a rank file of another checkpoint was put in its place; put back the rank "
                      "file of step " + std::to_string(step));
  return state;
}

template result<rank_state> load_rank_checkpoint<float>(const std::string&, const checkpoint_file&,
                                                        const model<float>&, const std::vector<int>&,
                                                        const metadata_map&, std::int64_t);
template result<rank_state> load_rank_checkpoint<double>(const std::string&, const checkpoint_file&,
                                                         const model<double>&, const std::vector<int>&,
                                                         const metadata_map&, std::int64_t);
template result<rank_state> read_rank_file<float>(const std::string&, const model<float>&,
                                                  const std::vector<int>&);
template result<rank_state> read_rank_file<double>(const std::string&, const model<double>&,
                                                   const std::vector<int>&);
template result<rank_state> parse_rank_file<float>(const safetensors_file&, const model<float>&,
                                                   const std::vector<int>&);
template result<rank_state> parse_rank_file<double>(const safetensors_file&, const model<double>&,
                                                    const std::vector<int>&);

}  // namespace pipeworks
