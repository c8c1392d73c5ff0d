// Removes dist/src before a build, so that a module deleted or moved out of src/ (the benchmarks
// moved to bench/, say) leaves no stale compiled file behind for `npm pack` to publish.
import { rmSync } from "node:fs";

rmSync("dist/src", { recursive: true, force: true });
