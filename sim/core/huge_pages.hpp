// Whether memory this process advises for transparent huge pages (madvise(MADV_HUGEPAGE), as the
// engine's block queues do: sim/engine/block_queue.hpp) gets them: Linux's THP mode is "always"
// or "madvise" (/sys/kernel/mm/transparent_hugepage/enabled) and the process has not turned them
// off (prctl PR_SET_THP_DISABLE). A 2 MiB chunk on a huge page is resident as a whole from its
// first touch; on small pages only the pages touched are.
#pragma once

namespace moesim {

bool transparent_huge_pages();

}  // namespace moesim
