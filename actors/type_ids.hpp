// The CAF type IDs of every message between pipeworks actors (CAF 0.17.5+'s type ID block), and
// the one call that registers them with an actor system. Both ends of a connection must call it:
// CAF drops a message of an unregistered type without a word.
#pragma once
#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "actors/remote_messages.hpp"
#include "actors/wire.hpp"

CAF_BEGIN_TYPE_ID_BLOCK(pipeworks, caf::first_custom_type_id)
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::activation_msg))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::gradient_msg))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::credit_msg))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::input_request))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::reduce_request))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::reduce_result))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::loss_report))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::norm_request))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::norm_result))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::step_report))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::marker_msg))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::trace_batch))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::rank_wiring))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::stage_failure))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::rank_done))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::trace_done))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::checkpoint_written))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::pipeline_wiring))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::run_outcome))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::timeline))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::hello_msg))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::host_request))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::host_reply))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::run_ended))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::join_msg))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::wire_msg))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::wire_peers))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::reduce_chunk))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::gather_chunk))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::shard_wiring))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::checkpoints_kept))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::rank_stalled))
CAF_ADD_TYPE_ID(pipeworks, (pipeworks::rendezvous_failed))
CAF_END_TYPE_ID_BLOCK(pipeworks)

namespace pipeworks {

// Registers every pipeworks message type with the system that `config` will make.
inline void add_message_types(caf::actor_system_config& config) {
  config.add_message_types<caf::id_block::pipeworks>();
}

}  // namespace pipeworks
