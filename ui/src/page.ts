/** A page of the dashboard: built once when navigated to, refreshed by the live loop. */
export interface Page {
  /** The document title's first part. */
  title: string;
  /** Builds the page's skeleton into `view`. */
  mount(view: HTMLElement): void;
  /** Reads the server again and updates the page; the loop calls it every 2 s (null: never). */
  refresh: (() => Promise<void>) | null;
}
