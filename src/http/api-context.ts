import type { ApiKeyService } from '../auth/api-keys.service';
import type { Retriever } from '../memory/retrieval.types';
import type { JobEventsHub } from '../queue/job-events';
import type { Services } from '../services';

/** What the api's routes share: the common services plus client keys, the management token, job events and retrieval. */
export interface ApiContext extends Services {
  apiKeys: ApiKeyService;
  managementToken: string;
  jobEvents: JobEventsHub;
  retrieval: Retriever;
}
