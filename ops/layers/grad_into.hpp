// How a backward kernel writes an input gradient: added into what the buffer holds, or written
// over a buffer that holds nothing yet (no zero fill first).
#pragma once

namespace pipeworks {

// overwrite gives the bits accumulate would give into zeros (a -0 comes out as +0 in both), so a
// caller may choose it for any fresh buffer without changing a result.
enum class grad_into { accumulate, overwrite };

}  // namespace pipeworks
