# Writes the ```cpp blocks of the given Markdown files (README.md and docs/*.md) into one C++ file,
# each in a block of its own after a prelude that declares what the prose assumes (m, cfg, text,
# on_step, data_fn): the build compiles it. A #line before each block makes a compile error name
# the document and its line.
function(pipeworks_readme_snippets out)
  set(body "")
  set(n 0)
  foreach(doc IN LISTS ARGN)
    file(READ "${doc}" text)
    file(RELATIVE_PATH name "${PROJECT_SOURCE_DIR}" "${doc}")
    # Plain string searches, never lists: C++ is full of ';', which CMake lists split at.
    set(line 1)
    while(TRUE)
      string(FIND "${text}" "```cpp\n" at)
      if(at EQUAL -1)
        break()
      endif()
      # The block's first line: the lines before the fence, plus the fence's own.
      string(SUBSTRING "${text}" 0 ${at} before)
      string(LENGTH "${before}" with_newlines)
      string(REPLACE "\n" "" before "${before}")
      string(LENGTH "${before}" without_newlines)
      math(EXPR line "${line} + ${with_newlines} - ${without_newlines} + 1")
      math(EXPR from "${at} + 7")
      string(SUBSTRING "${text}" ${from} -1 text)
      string(FIND "${text}" "```" end)
      if(end EQUAL -1)
        message(FATAL_ERROR "${name}:${line}: a ```cpp block that is never closed")
      endif()
      string(SUBSTRING "${text}" 0 ${end} block)
      math(EXPR n "${n} + 1")
      string(APPEND body "  {  // ${name}, snippet ${n}\n#line ${line} \"${doc}\"\n${block}  }\n")
      # Go on after the closing fence, counting the block's lines.
      string(LENGTH "${block}" with_newlines)
      string(REPLACE "\n" "" block "${block}")
      string(LENGTH "${block}" without_newlines)
      math(EXPR line "${line} + ${with_newlines} - ${without_newlines}")
      math(EXPR from "${end} + 3")
      string(SUBSTRING "${text}" ${from} -1 text)
    endwhile()
  endforeach()
  if(n EQUAL 0)
    message(FATAL_ERROR "no ```cpp blocks found in ${ARGN}")
  endif()
  file(WRITE "${out}.new" "// Generated from README.md and docs/*.md by cmake/ReadmeSnippets.cmake: do not edit.
#include \"actors/pipeline.hpp\"
#include \"ops/data/text.hpp\"
#include \"ops/device/device_context.hpp\"
#include \"ops/model/gpt.hpp\"
#include \"ops/train/sources.hpp\"
#include \"ops/train/trainer.hpp\"
#include \"runtime/plan_schedule.hpp\"
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
