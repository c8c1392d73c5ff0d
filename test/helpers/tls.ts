/**
 * Certificates made with openssl for TLS tests: a private CA, a server certificate it signed for
 * `localhost` and 127.0.0.1, and another CA that signed nothing of ours. Valid for two days.
 */
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

/** Paths of the files {@link makeCertificates} wrote. */
export interface TestCertificates {
  /** The CA that signed the server certificate (PEM). */
  caCert: string;
  /** The server's certificate and key (PEM; the key unencrypted). */
  serverCert: string;
  serverKey: string;
  /** A CA that signed nothing of ours: a client trusting it alone must refuse the server. */
  otherCaCert: string;
}

/** @throws Error naming openssl when it is not installed. */
function openssl(folder: string, args: string[]): void {
  try {
    execFileSync("openssl", args, { cwd: folder, stdio: ["ignore", "ignore", "pipe"], timeout: 30_000 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT")
      throw new Error(
        "openssl is not installed (apt-get install openssl): the TLS tests make certificates with it",
      );
    throw error;
  }
}

const KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];

/** Writes a CA, a server certificate for `localhost`/127.0.0.1 signed by it, and another CA, into `folder`. */
export function makeCertificates(folder: string): TestCertificates {
  const days = ["-days", "2"];
  openssl(folder, [
    "req",
    "-x509",
    ...KEY,
    "-keyout",
    "ca.key",
    "-out",
    "ca.crt",
    ...days,
    "-subj",
    "/CN=taskqueue test CA",
  ]);
  openssl(folder, ["req", ...KEY, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"]);
  writeFileSync(join(folder, "server.ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n");
  openssl(folder, [
    "x509",
    "-req",
    "-in",
    "server.csr",
    "-CA",
    "ca.crt",
    "-CAkey",
    "ca.key",
    "-CAcreateserial",
    "-out",
    "server.crt",
    ...days,
    "-extfile",
    "server.ext",
  ]);
  openssl(folder, [
    "req",
    "-x509",
    ...KEY,
    "-keyout",
    "other.key",
    "-out",
    "other.crt",
    ...days,
    "-subj",
    "/CN=another CA",
  ]);
  return {
    caCert: join(folder, "ca.crt"),
    serverCert: join(folder, "server.crt"),
    serverKey: join(folder, "server.key"),
    otherCaCert: join(folder, "other.crt"),
  };
}
