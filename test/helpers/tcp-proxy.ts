/**
 * A TCP proxy on loopback that a test controls, for cutting a client off from PostgreSQL the way
 * networks fail:
 * - `forward`: bytes pass both ways (the start);
 * - `blackhole`: bytes stop both ways, but every TCP connection stays open (no FIN, no RST), as
 *   when a link or a NAT drops packets silently; new connections are accepted and also get nothing;
 * - `drop`: every open connection is reset and new ones are refused (reset at once);
 * - `slow`: bytes pass, each chunk held back `delayMs` first.
 * Bytes held back while blackholed are discarded, never delivered later, and so is the end of one leg
 * (the other stays open until it ends by itself). Only the connections
 * accepted while {@link TcpProxy.match} holds are affected by a mode other than `forward` (default:
 * all), so a test can cut one connection of a client (its LISTEN connection, say) and not the rest.
 */
import net from "node:net";

export type ProxyMode =
  | { kind: "forward" }
  | { kind: "blackhole" }
  | { kind: "drop" }
  | { kind: "slow"; delayMs: number };

interface Link {
  client: net.Socket;
  server: net.Socket;
  /** Set at accept time: this link obeys the proxy's mode (else it always forwards). */
  affected: boolean;
}

export class TcpProxy {
  private mode: ProxyMode = { kind: "forward" };
  private readonly links = new Set<Link>();
  private server: net.Server | null = null;
  private listenPort = 0;
  /** Connections accepted so far (for tests counting reconnects). */
  accepted = 0;
  /** Decides, per accepted connection (numbered from 1), whether modes apply to it. */
  match: (connectionNumber: number) => boolean = () => true;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  /** Listens on 127.0.0.1 (a free port). Resolves with the port. */
  async start(): Promise<number> {
    const server = net.createServer((client) => this.accept(client));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    this.server = server;
    this.listenPort = (server.address() as net.AddressInfo).port;
    return this.listenPort;
  }

  get port(): number {
    return this.listenPort;
  }

  /** A connection string through the proxy, from one to the target (host and port replaced). */
  url(connectionString: string): string {
    const url = new URL(connectionString);
    url.hostname = "127.0.0.1";
    url.port = String(this.listenPort);
    return url.toString();
  }

  /** Open links (both legs up). */
  get openLinks(): number {
    return this.links.size;
  }

  /** Changes the mode for every affected link, open or future. `drop` resets open links at once. */
  set(mode: ProxyMode): void {
    this.mode = mode;
    if (mode.kind === "drop") for (const link of [...this.links]) if (link.affected) this.close(link, true);
  }

  private accept(client: net.Socket): void {
    const number = ++this.accepted;
    const affected = this.match(number);
    if (affected && this.mode.kind === "drop") {
      client.resetAndDestroy();
      return;
    }
    const server = net.connect(this.targetPort, this.targetHost);
    const link: Link = { client, server, affected };
    this.links.add(link);
    const pipe = (from: net.Socket, to: net.Socket) => {
      from.on("data", (chunk) => {
        const mode = link.affected ? this.mode : ({ kind: "forward" } as const);
        if (mode.kind === "blackhole" || mode.kind === "drop") return;
        if (mode.kind === "slow") setTimeout(() => to.writable && to.write(chunk), mode.delayMs).unref();
        else if (to.writable) to.write(chunk);
      });
    };
    pipe(client, server);
    pipe(server, client);
    for (const socket of [client, server]) {
      const other = socket === client ? server : client;
      // Neither FIN nor RST crosses a blackhole: while blackholed, the other leg stays open until
      // it ends by itself (say, the server ends an idle session), or the proxy drops or stops.
      const end = () => {
        if (link.affected && this.mode.kind === "blackhole" && !other.destroyed) return;
        this.close(link, false);
      };
      socket.on("error", end);
      socket.on("close", end);
    }
  }

  private close(link: Link, reset: boolean): void {
    if (!this.links.delete(link)) return;
    for (const socket of [link.client, link.server]) {
      if (reset && !socket.destroyed) socket.resetAndDestroy();
      else socket.destroy();
    }
  }

  /** Closes every link and stops listening. */
  async stop(): Promise<void> {
    for (const link of [...this.links]) this.close(link, true);
    const server = this.server;
    this.server = null;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
