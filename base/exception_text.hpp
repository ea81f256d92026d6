// What a caught exception says to a user: its message, or for a failed allocation (which says
// only "std::bad_alloc") that memory ran out and how much this process held.
#pragma once
#include <exception>
#include <string>

namespace pipeworks {

// e.what(), except for std::bad_alloc and std::length_error (a size too large to allocate):
// "out of memory: an allocation failed while this process held 1.2 GiB of this machine's 16 GiB".
std::string exception_text(const std::exception& e);

// Whether e is a failed allocation (std::bad_alloc or std::length_error).
bool is_out_of_memory(const std::exception& e);

}  // namespace pipeworks
