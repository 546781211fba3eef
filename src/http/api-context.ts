import type { AdminSessionService } from '../auth/admin-sessions.service';
import type { ApiKeyService } from '../auth/api-keys.service';
import type { AuthThrottle } from './auth-throttle';
import type { Retriever } from '../memory/retrieval.types';
import type { UpstreamClient } from '../proxy/upstream';
import type { JobEventsHub } from '../queue/job-events';
import type { Services } from '../services';

/** What the api's routes share: the common services plus client keys, the management token, operators' sessions, job events and retrieval. */
export interface ApiContext extends Services {
  apiKeys: ApiKeyService;
  managementToken: string;
  /** Operators' browser sessions (the /admin login cookie; with the CSRF header it also opens /api for the dashboard). */
  adminSessions: AdminSessionService;
  /** Per-IP brake on wrong credentials (every auth check of /api, /v1, /mcp and /admin/login). */
  authThrottle: AuthThrottle;
  /** The built dashboard (index.html + assets) served at /dashboard; it may not exist before `npm run build`. */
  dashboardDir: string;
  jobEvents: JobEventsHub;
  retrieval: Retriever;
  /** The OpenAI-compatible upstream /v1 relays to, with its keep-alive pool (closed at shutdown, after the http server). */
  upstream: UpstreamClient;
}
