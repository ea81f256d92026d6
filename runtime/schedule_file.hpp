// Schedules read from a file (--schedule-file): PyTorch pipelining's CSV in both of its formats
// and pipeworks' own action text, told apart by their content, made into a run's schedule.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"
#include "runtime/schedule.hpp"

namespace pipeworks {

// What a schedule file holds, as parse_schedule_file tells from its content:
//  - pytorch_compute_only: CSV as _PipelineScheduleRuntime._load_csv(f) reads it: one row per
//    rank of one pipeline, cells F, B, I and W ("1F0"), an empty cell an idle slot, no header;
//  - pytorch_compute_comms: CSV as _load_csv(f, format="compute_comms") reads it: the same with
//    SEND_F, RECV_F, SEND_B, RECV_B and REDUCE_GRAD cells, and no empty cell;
//  - pipeworks_csv: CSV with STEP cells, as `pipeworks schedule --csv` writes it: every rank
//    (replica * p + device) for every step, with REDUCE and STEP, read like action text with STEPs;
//  - pipeworks_text: pipeworks' action text. One rank per line, its actions as to_string(action)
//    writes them ("0F0 0SEND_F0 1RECV_F0 1F0"), separated by spaces; a line may start with
//    "rank N:" (as `pipeworks schedule` prints it; N counts from 0 in order); "#" starts a
//    comment to the end of the line, a line "# versions: sync" (or "latest") names the
//    version rule and a line "# routes: 2" says the programs run dualpipe's two routes; blank
//    lines are skipped.
// CSV is told by its commas; UNSHARD and RESHARD cells (FSDP's) are skipped; an OVERLAP_F_B cell
// "(0F1;1B0)OVERLAP_F_B" is that action and the two it joins, in both forms.
enum class schedule_file_format {
  pytorch_compute_only, pytorch_compute_comms, pipeworks_csv, pipeworks_text,
};
std::string_view schedule_file_format_name(schedule_file_format f);  // "PyTorch CSV (compute_only)", ...

// The weight versions of a schedule from a file: sync (microbatch k of step t uses version t,
// which the validator checks the programs allow) or latest (each F uses its stage's newest
// version, its backward the same: weight stashing).
enum class version_mode { sync, latest };
std::string_view version_mode_name(version_mode v);  // "sync", "latest"
result<version_mode> parse_version_mode(std::string_view name);

struct schedule_file {
  schedule_file_format format = schedule_file_format::pipeworks_text;
  // One program per row. Without STEPs: one pipeline (p rows) for one optimizer step, microbatch
  // ids 0..m-1 (REDUCE, REDUCE_GRAD dropped: the run adds its own). With STEPs (pipeworks' text
  // and CSV): every rank (replica * p + device) for as many steps as each stage has STEPs.
  std::vector<program> rows;
  bool lowered = false;    // the rows carry SEND/RECV pairs
  bool has_steps = false;  // the rows carry STEPs
  // The version rule the text names in a "# versions: ..." comment, as `pipeworks schedule` prints
  // it: sync for "sync" or "synchronous ...", latest for "latest ..." or "weight stashing ...";
  // another rule ("double buffering ...") is kept in other_versions, which no file runs.
  std::optional<version_mode> versions;
  std::string other_versions;
  // Routes through the virtual stages (schedule::routes): 1, or 2 from a line "# routes: 2"
  // (dualpipe: stages p..2p-1 are copies of 0..p-1, fed from the other end).
  int routes = 1;
};

// The version rule a run of the file follows: `given` (a flag), else the file's own, else sync
// without STEPs and latest with them. An error when the file names a rule no file runs.
result<version_mode> file_versions(const schedule_file& f, std::optional<version_mode> given);

// Reads a schedule file's text. Errors name the line, the column or cell, and what to write.
result<schedule_file> parse_schedule_file(std::string_view text);

// The rows as pipeworks' action text ("rank N: ..." lines under a comment line saying what it
// is): what a run plan carries, and what parse_schedule_file reads back to the same rows.
// With routes = 2 the text's second line is routes_line, which parse_schedule_file reads back.
std::string to_programs_text(const std::vector<program>& rows, int routes = 1);
inline constexpr std::string_view routes_line = "# routes: 2\n";

// What a file says about the run that follows it.
struct schedule_file_shape {
  int stages = 1;        // p: the devices of one pipeline
  int chunks = 1;        // v: the virtual stages per device
  int microbatches = 1;  // m: per step and replica
  int steps = 1;         // the steps the file covers (its STEPs per stage; 1 without)
};
// `replicas`: w, which the rows of a file with STEPs cover. An error when the rows do not make a
// schedule (no forward, a stage on two devices or with no forward, a device with another number
// of virtual stages than the others).
result<schedule_file_shape> shape_of(const schedule_file& f, int replicas);

// The schedule of a run with `replicas` replicas and `steps` steps from a file. Without STEPs
// the file's pipeline is repeated for every step (microbatch ids offset by t*m), a [REDUCE when
// w > 1 and] STEP put after each stage's m-th B or W of the step (and the sends right after it
// when the rows carry sends), as the built-in flush schedules do, and copied to every replica; versions sync.
// With STEPs the file is repeated steps / (its steps) times; versions by file_versions. Each virtual stage runs on the device whose row runs its F. The schedule is lowered
// exactly when the file was (lower_communication adds the pairs to one that was not), and not
// yet validated.
result<schedule> schedule_from_file(const schedule_file& f, int replicas, int steps,
                                    std::optional<version_mode> versions = std::nullopt);

}  // namespace pipeworks
