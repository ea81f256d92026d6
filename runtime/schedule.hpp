// A schedule as data: one program per rank plus the weight-version rule, and the generators
// that build them (GPipe, 1F1B, interleaved, zero bubble, BFS, the V schedules, PipeDream, 2BW,
// cyclic).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"
#include "runtime/action.hpp"

namespace pipeworks {

enum class schedule_kind {
  gpipe, one_f_one_b, interleaved, zb_h1, zb_h2, bfs, pipedream, pipedream_vs, two_bw, cyclic,
  zbv, v_half, v_min, dualpipev, dualpipe,
};
std::string_view schedule_name(schedule_kind k);        // "gpipe", "1f1b", ..., "2bw", "cyclic"
result<schedule_kind> parse_schedule_kind(std::string_view name);
// Every kind, in the order of their names' list.
const std::vector<schedule_kind>& every_schedule_kind();
// The names of the flush kinds (flush = true) or of the asynchronous ones, "gpipe, 1f1b, ...".
std::string schedule_names(bool flush);
bool is_flush(schedule_kind k);  // synchronous: every microbatch of step t uses version t
// The V schedules (zbv, v-half, v-min, dualpipev) place two virtual stages on each device, d and
// 2p-1-d, so that the model runs down the devices and back up: their chunk count is fixed at 2.
bool is_v_shape(schedule_kind k);
// The chunk count a kind runs when none is given: 2 for the V schedules, else 1.
int default_chunks(schedule_kind k);
// Whether the kind's backward is split into I (input gradient) and W (weight gradient).
bool splits_backward(schedule_kind k);
// Routes through the virtual stages: 1, or 2 for dualpipe, whose microbatches enter from both
// ends (see schedule::routes).
int default_routes(schedule_kind k);
// Whether the V planner plans the kind: the V schedules, and dualpipe (a V over half its devices,
// each position's pieces held by two mirrored devices).
inline bool v_planned(schedule_kind k) { return is_v_shape(k) || k == schedule_kind::dualpipe; }

// How the replicas of a stage combine their gradients (runtime.reduce).
//  collective: REDUCE is an all-reduce that every replica reaches before any goes on.
//  p2p (cyclic only, the seed paper's point-to-point variant): a chain. Replica q's REDUCE adds
//    its gradient to the partial sum of replicas 0..q-1 and hands it to q+1 without waiting for
//    the later ones; the last replica holds the sum, updates the stage alone (its optimizer
//    moments live there only) and sends the new version to each other replica, whose STEP
//    takes it where that version is first needed. The sum's order, 0 + 1 + ... + (w-1), and so
//    the bits, are the collective's.
enum class reduce_mode : std::uint8_t { collective, p2p };
std::string_view reduce_mode_name(reduce_mode m);  // "collective", "p2p"

struct schedule_params {
  int stages = 1;        // p: devices in one pipeline
  // m: microbatches per optimizer step, per replica and route. dualpipe's generator is given
  // the step's microbatches of both routes and keeps half of them here.
  int microbatches = 1;
  int chunks = 1;        // v: virtual stages per device (interleaved, bfs; 2 for the V schedules)
  int replicas = 1;      // w: data-parallel replicas of every stage
  int steps = 1;         // optimizer steps the programs cover
  reduce_mode reduce = reduce_mode::collective;
};

// Whether replica `replica` runs the optimizer: every one, but under p2p only the chain's last.
inline bool runs_update(const schedule_params& p, int replica) {
  return p.reduce != reduce_mode::p2p || replica == p.replicas - 1;
}

// Which weight version a (virtual stage, microbatch) uses for its forward and its backward.
// Microbatch ids are global over steps: microbatch k of step t has id t*m + k. Version numbers
// count optimizer steps of that stage: version 0 is the initial weights.
struct version_use {
  int forward = 0;
  int backward = 0;
  bool operator==(const version_use&) const = default;
};

struct schedule {
  schedule_kind kind = schedule_kind::gpipe;
  schedule_params params;
  int virtual_stages = 1;  // p * v: model pieces in order, once per route
  // device_of[s]: the device (0..p-1) that runs virtual stage s.
  std::vector<int> device_of;
  // Routes: the virtual stages form `routes` pipelines of virtual_stages / routes stages each,
  // which a microbatch of that route runs in order: its data enters at the route's first stage
  // and its loss is taken at the last. Virtual stage s runs model piece s % route_stages(), so
  // with 2 routes every piece runs twice: dualpipe's two mirrored copies, device d holding piece
  // d of the route from device 0 (stage d) and piece p-1-d of the route from device p-1 (stage
  // 2p-1-d). Copies of one piece sum their gradients at REDUCE (every replica's and every
  // route's) and step alike. Microbatch ids are each route's own, m per step.
  int routes = 1;
  // programs[r]: rank r = replica * p + device. Every rank of a replica group has the same
  // program; microbatch ids in the actions are that replica's own (0 .. steps*m - 1).
  std::vector<program> programs;
  // versions[s][mb]: the version rule for virtual stage s and global microbatch id mb.
  std::vector<std::vector<version_use>> versions;
  // One line stating the version rule, for people.
  std::string version_rule;
  // True once lower_communication has added SEND/RECV pairs: the validator then requires a RECV
  // before every compute action whose input comes from another device.
  bool lowered = false;
  // Whether the programs must carry exactly params.steps STEPs per (replica, virtual stage).
  // False only for hand-written programs without any STEP (schedule_from_programs).
  bool steps_known = true;
  // Made by schedule_from_programs: no built-in kind (kind is a placeholder), versions by the
  // latest-version rule; the validator checks the table against that rule.
  bool custom_programs = false;

  int ranks() const { return static_cast<int>(programs.size()); }
  int route_stages() const { return virtual_stages / routes; }
  bool starts_route(int s) const { return s % route_stages() == 0; }     // reads the data
  bool ends_route(int s) const { return (s + 1) % route_stages() == 0; }  // takes the loss
  int piece_of(int s) const { return s % route_stages(); }
  // Ranks that meet at a REDUCE of virtual stage s: every replica's copies of its piece.
  int reduce_group_size() const { return params.replicas * routes; }
  // The members of a reduce (and the driver's dealing): the copy of stage s on replica q is
  // member r * w + q, r its route; with one route, the replica.
  int member(int s, int replica) const {
    return s / route_stages() * params.replicas + replica;
  }
  int member_replica(int member) const { return member % params.replicas; }
  // Member j's copy of a piece (its stage on its route).
  int member_stage(int member, int piece) const {
    return member / params.replicas * route_stages() + piece;
  }
  int total_microbatches() const { return params.microbatches * params.steps; }
  int rank_of(int replica, int device) const { return replica * params.stages + device; }
};

// Generators: compute-only programs (F, B or I/W, REDUCE, STEP), before lowering.
// Each returns an error that says why the parameters are not permitted and what would work.
result<schedule> make_schedule(schedule_kind kind, const schedule_params& params);
result<schedule> gpipe(const schedule_params& params);
result<schedule> one_f_one_b(const schedule_params& params);
result<schedule> interleaved(const schedule_params& params);
result<schedule> zero_bubble_h1(const schedule_params& params);
result<schedule> zero_bubble_h2(const schedule_params& params);
result<schedule> breadth_first(const schedule_params& params);
result<schedule> pipedream(const schedule_params& params);
result<schedule> pipedream_vertical_sync(const schedule_params& params);
result<schedule> pipedream_2bw(const schedule_params& params);
result<schedule> cyclic(const schedule_params& params);
result<schedule> zbv(const schedule_params& params);
result<schedule> v_half(const schedule_params& params);
result<schedule> v_min(const schedule_params& params);
result<schedule> dualpipev(const schedule_params& params);
// DualPipe (DeepSeek): p even devices, microbatches from both ends (params.microbatches, even,
// is the step's total; each route runs half), two mirrored copies of every stage; see routes.
result<schedule> dualpipe(const schedule_params& params);
// Cyclic's version rule: microbatch k of step t >= 1 uses version t-1 when k < this split
// (min(m, p - 1 + floor((w - 1) m / w))), else t; see runtime/schedules/cyclic.cpp.
int cyclic_version_split(const schedule_params& params);

// The lowering pass: adds SEND_F/RECV_F/SEND_B/RECV_B pairs between virtual stages that sit on
// different devices. Sends are asynchronous; a RECV waits for its SEND.
schedule lower_communication(const schedule& compute_only);

// CSV: one row per rank, cells are action strings (PyTorch's pipelining format).
std::string to_csv(const schedule& s);
std::string to_csv(const std::vector<program>& programs);
// (What PyTorch itself can load, one pipeline for one step, is in runtime/pytorch_csv.hpp.)
result<std::vector<program>> parse_csv(std::string_view text);

// A schedule around hand-written or imported programs (one per rank, rank = replica * p + device):
// virtual stage s runs on device s % p, or with infer_placement on the device whose row runs its
// forwards (a stage with forwards on two devices or none, or a device holding other than `chunks`
// stages, is an error naming the stage and rows: V-shaped programs place stages d and 2p-1-d on
// device d). The step count is the number of STEPs per stage (the most
// of any stage; 1 with steps_known = false when there are none), and m = (largest microbatch
// id + 1) / steps, which must divide evenly. Versions by the latest-version rule. Microbatch ids
// must be below the number of actions in the programs. `lowered`: the programs carry SEND/RECV.
result<schedule> schedule_from_programs(std::vector<program> programs, int devices, int chunks = 1,
                                        int replicas = 1, bool lowered = true,
                                        bool infer_placement = false);

}  // namespace pipeworks
