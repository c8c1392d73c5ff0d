/**
 * What the CLI prints for a connection that failed on TLS: node-postgres passes Node's certificate
 * errors on as they are ("unable to verify the first certificate"), which name neither PostgreSQL
 * nor what to change.
 */

/** Node's certificate verification codes (`UNABLE_TO_VERIFY_LEAF_SIGNATURE`, `ERR_TLS_CERT_ALTNAME_INVALID`, …). */
const CERTIFICATE_CODE = /CERT|^UNABLE_TO_|^ERR_TLS_|^ERR_SSL_|HOSTNAME_MISMATCH/;

/** The error, or one of its causes, whose `code` is a certificate error; null if none is. */
function certificateError(error: unknown): (Error & { code: string }) | null {
  for (let current = error, depth = 0; current instanceof Error && depth < 5; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string" && CERTIFICATE_CODE.test(code)) return current as Error & { code: string };
    current = (current as { cause?: unknown }).cause;
  }
  return null;
}

/**
 * A line saying what to do when `error` is a failed TLS connection to PostgreSQL (a refused
 * certificate, or a server without TLS while DATABASE_URL asks for it); null for any other error.
 */
export function tlsHint(error: unknown): string | null {
  const refused = certificateError(error);
  if (refused)
    return `PostgreSQL's TLS certificate was refused (${refused.message}, ${refused.code}): give the CA that signed it as sslrootcert=<file> in DATABASE_URL (or NODE_EXTRA_CA_CERTS=<file>), and connect by a host name or address the certificate names`;
  if (error instanceof Error && /server does not support SSL/i.test(error.message))
    return `PostgreSQL does not accept TLS (${error.message}): turn ssl on at the server, or drop sslmode from DATABASE_URL`;
  return null;
}
