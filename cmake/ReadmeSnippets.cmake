# Writes the README's ```cpp blocks into one C++ file, each in a block of its own after a prelude
# that declares what the prose assumes (m, cfg, text, on_step, data_fn): the build compiles it.
function(pipeworks_readme_snippets readme out)
  file(READ "${readme}" text)
  # CMake lists split at ';', which C++ is full of: hide them while matching.
  string(REPLACE ";" "@PIPEWORKS_SEMICOLON@" text "${text}")
  string(REGEX MATCHALL "```cpp\n[^`]*```" blocks "${text}")
  set(body "")
  set(n 0)
  foreach(block IN LISTS blocks)
    string(REGEX REPLACE "^```cpp\n" "" block "${block}")
    string(REGEX REPLACE "```$" "" block "${block}")
    string(REPLACE "@PIPEWORKS_SEMICOLON@" ";" block "${block}")
    math(EXPR n "${n} + 1")
    string(APPEND body "  {  // README snippet ${n}\n${block}  }\n")
  endforeach()
  if(n EQUAL 0)
    message(FATAL_ERROR "no ```cpp blocks found in ${readme}")
  endif()
  file(WRITE "${out}.new" "// Generated from README.md by cmake/ReadmeSnippets.cmake: do not edit.
#include \"actors/pipeline.hpp\"
#include \"ops/data/text.hpp\"
#include \"ops/device/device_context.hpp\"
#include \"ops/model/gpt.hpp\"
#include \"ops/train/sources.hpp\"
#include \"ops/train/trainer.hpp\"
#include \"runtime/run_plan.hpp\"
#include \"runtime/schedule.hpp\"
#include \"runtime/simulate.hpp\"
#include \"runtime/validate.hpp\"

using namespace pipeworks;

#pragma GCC diagnostic ignored \"-Wunused-variable\"
#pragma GCC diagnostic ignored \"-Wshadow\"

void pipeworks_readme_snippets() {
  model<float> m = make_gpt<float>(gpt_tiny());
  train_config cfg;
  result<text_corpus> text = load_text(\"/usr/share/games/fortunes\");
  auto on_step = [](const step_metrics&) {};
  minibatch_fn data_fn = text_minibatches(text->view(), 8, 64, 1);
${body}}
")
  # Rewrite only on change, so that configuring again does not rebuild it.
  file(COPY_FILE "${out}.new" "${out}" ONLY_IF_DIFFERENT)
  file(REMOVE "${out}.new")
endfunction()
