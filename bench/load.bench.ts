export async function runLoadBench(): Promise<void> {}
