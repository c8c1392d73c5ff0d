/** The box-drawn result tables the benchmarks print (the seed's layout). */

/** A row: `[label, value]`, or a full-width line of text. */
export type TableRow = readonly [label: string, value: string] | string;

/** A table: a title, then sections separated by rules. */
export interface Table {
  title: string;
  sections: readonly (readonly TableRow[])[];
}

const MIN_INNER_WIDTH = 57;

/** Renders `table` as box-drawing lines (no trailing newline); labels left, values after a gutter. */
export function renderTable(table: Table): string {
  const rows = table.sections.flat();
  const labelWidth = Math.max(0, ...rows.map((r) => (typeof r === "string" ? 0 : r[0].length)));
  const text = (r: TableRow) => (typeof r === "string" ? r : `${r[0].padEnd(labelWidth)}   ${r[1]}`);
  const inner = Math.max(MIN_INNER_WIDTH, table.title.length + 2, ...rows.map((r) => text(r).length + 2));
  const line = (content: string) => `│ ${content.padEnd(inner - 2)} │`;
  const rule = (left: string, right: string) => `${left}${"─".repeat(inner)}${right}`;
  const out = [rule("┌", "┐"), line(table.title)];
  for (const section of table.sections) {
    out.push(rule("├", "┤"));
    for (const row of section) out.push(line(text(row)));
  }
  out.push(rule("└", "┘"));
  return out.join("\n");
}
