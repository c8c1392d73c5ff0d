import { Type, FormatRegistry } from "@sinclair/typebox";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import { Value } from "@sinclair/typebox/value";
FormatRegistry.Set("date-time", (s) => /Z$/.test(s));
const S = Type.Object({ type: Type.String({minLength:1}), priority: Type.Optional(Type.Integer({minimum:1, maximum:10, default: 5})), run_at: Type.Optional(Type.String({format:"date-time"})), status: Type.Optional(Type.Union(["a","b"].map(x=>Type.Literal(x)))), payload: Type.Optional(Type.Unknown()) }, { additionalProperties: false });
const C = TypeCompiler.Compile(S);
for (const v of [{}, {type: 5, priority: "high", extra: 1, "a/b": 2, run_at: "x", status: "c"}, {type:"x", priority: 2.5}, "str", null]) {
  console.log(JSON.stringify(v), [...C.Errors(v)].map(e => ({type: e.type, path: e.path, message: e.message})));
}
console.log(Value.Default(S, {type: "x"}));
console.log(Value.Convert(Type.Object({id: Type.Integer()}), {id: "5.5"}), Value.Convert(Type.Object({id: Type.Integer()}), {id: "1e3"}));
console.log(JSON.stringify(S));
