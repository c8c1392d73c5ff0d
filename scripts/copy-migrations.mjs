// Copies the plain-SQL migrations next to the compiled migration runner, so that the
// runner finds them at the same relative path in `src/` (tsx, tests) and `dist/src/`.
import { cpSync, mkdirSync } from "node:fs";

mkdirSync("dist/src/db/migrations", { recursive: true });
cpSync("src/db/migrations", "dist/src/db/migrations", { recursive: true });
