// An SVG timeline for people: one row per rank, time to the right, each action a box coloured by
// its microbatch, with the bubbles left empty, a time axis and a legend.
#pragma once
#include <string>

#include "runtime/timeline.hpp"

namespace pipeworks {

struct svg_options {
  int width = 1200;       // pixels, the whole picture
  int row_height = 26;    // pixels per rank
};

// Draws the compute stream of every rank. Each action is a <rect class="act"> (so a picture has
// exactly one per compute event) with a <title> tooltip. The fill is the microbatch's palette
// colour: F light, B full colour, I full colour striped, W light striped, REDUCE and STEP grey.
// Boxes wide enough carry their kind and microbatch ("F3"); a later chunk of an interleaved or
// looped schedule (virtual stage >= p) has a dark bar on top and a prime per chunk ("F3′").
// When the actions used more than one weight version, each box shows its version ("v1") under
// the label. Each row ends with its idle share.
std::string to_svg(const timeline& t, const svg_options& options = {});

}  // namespace pipeworks
