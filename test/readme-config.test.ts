/**
 * The README's configuration table says what src/config.ts does: one row per option, naming its
 * environment variable and field, with the schema's default.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { it } from "node:test";
import { environmentVariables } from "../src/config.js";

const README = readFileSync(new URL("../../README.md", import.meta.url), "utf8");

/** Rows of the table under "## Configuration": variable, option and default of each option. */
function tableRows(): Map<string, { field: string; default: string }> {
  const section = README.split("## Configuration")[1]?.split("\n## ")[0] ?? "";
  const rows = new Map<string, { field: string; default: string }>();
  for (const line of section.split("\n")) {
    if (!line.startsWith("| `")) continue;
    const [variables = "", fields = "", defaults = ""] = line.split("|").slice(1, 4);
    const names = (cell: string) => cell.split(" / ").map((part) => part.trim().replaceAll("`", ""));
    const envs = names(variables);
    const options = names(fields);
    const values = names(defaults);
    envs.forEach((env, i) => {
      rows.set(env, { field: options[i] ?? "", default: values[i] ?? values[0] ?? "" });
    });
  }
  return rows;
}

it("the README's configuration table lists every option with its variable, field and default", () => {
  const rows = tableRows();
  const variables = environmentVariables();
  for (const variable of variables) {
    const row = rows.get(variable.env);
    assert.ok(row, `README lists ${variable.env}`);
    assert.equal(row.field, variable.field, `${variable.env}'s option`);
    if (variable.default !== undefined)
      assert.equal(row.default, String(variable.default), `${variable.env}'s default`);
  }
  assert.deepEqual(
    [...rows.keys()].filter((env) => !variables.some((v) => v.env === env)),
    [],
    "every row names a real variable",
  );
});
