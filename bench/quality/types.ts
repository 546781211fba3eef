/**
 * A labelled retrieval set: chat turns (one API key per chat) and questions whose evidence turns
 * are known. Shapes follow the held-out benchmark of issue #10: each turn is stored as an
 * `episodic` memory whose content is `Speaker: text`, metadata `{ date }`, created at its session's date.
 */

export const QUESTION_KINDS = ['single-hop', 'multi-hop', 'temporal', 'open-domain'] as const;
export type QuestionKind = (typeof QUESTION_KINDS)[number];

/**
 * Cross-cutting slices:
 * - paraphrase: the question shares no content word (not even a crude stem) with any evidence
 *   turn, apart from the chat's two speaker names — only meaning links them (the vector tier's job);
 * - rare-token: the question names a rare token (made-up company, product code, codename, unusual
 *   place or person) that also appears in an evidence turn — the keyword tier's job;
 * - updated: the fact was stated earlier and contradicted later; only the newer turn is evidence.
 */
export const QUESTION_TAGS = ['paraphrase', 'rare-token', 'updated'] as const;
export type QuestionTag = (typeof QUESTION_TAGS)[number];

export interface SetTurn {
  /** Stable id within the set (e.g. `friends/c03/s07/t05`). */
  id: string;
  /** The chat it belongs to: one API key per chat. */
  chat: string;
  session: number;
  speaker: string;
  /** `Speaker: text`, as stored. */
  content: string;
  /** The session's day, YYYY-MM-DD (stored as metadata `{ date }`). */
  date: string;
  /** ISO-8601 instant: the session's start plus a few seconds per turn (stored as created_at/updated_at). */
  createdAt: string;
}

export interface SetQuestion {
  id: string;
  chat: string;
  kind: QuestionKind;
  tags: QuestionTag[];
  question: string;
  /** Ids of the turns that answer it (all of them count towards recall). */
  evidence: string[];
  /** A short reference answer, for people reading the set (not scored). */
  answer: string;
  /** The rare token a rare-token question hinges on. */
  rareToken?: string;
}

export interface SetChat {
  id: string;
  speakers: [string, string];
  sessions: number;
}

export interface LabelledSet {
  name: string;
  description: string;
  /** The generator seed (null for the hand-written set). */
  seed: number | null;
  chats: SetChat[];
  turns: SetTurn[];
  questions: SetQuestion[];
}
