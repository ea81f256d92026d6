// The validator's layout check, internal to validate.cpp: the shape of a schedule value before its
// programs are read (p, w, virtual stages, device_of, the rank count, m x steps against actions).
#pragma once
#include "base/result.hpp"
#include "runtime/schedule.hpp"

namespace pipeworks::detail {

// Ok when p, w and the virtual stage count are >= 1, device_of places every virtual stage on a
// device, there is one program per rank, and w * stages * m * steps forwards fit in the programs'
// action count (which also bounds every table sized by microbatch ids).
status check_layout(const schedule& s);

}  // namespace pipeworks::detail
