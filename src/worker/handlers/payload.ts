import { PayloadError } from "../../errors.js";
import type { JsonValue } from "../../queue/types.js";

/** The payload as an object, or a PayloadError naming the job type. */
export function payloadObject(type: string, payload: JsonValue): Record<string, JsonValue> {
  if (payload === null || typeof payload !== "object" || Array.isArray(payload))
    throw new PayloadError(`${type}: payload must be an object`);
  return payload;
}

/** An integer field in [min, max], or a PayloadError naming the field. */
export function integerField(
  type: string,
  payload: JsonValue,
  field: string,
  min: number,
  max: number,
): number {
  const value = payloadObject(type, payload)[field];
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min || value > max)
    throw new PayloadError(
      `${type}: payload.${field} must be an integer from ${min} to ${max}, got ${JSON.stringify(value)}`,
    );
  return value;
}
