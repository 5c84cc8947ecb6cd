// Writes Pi's provider config for the scripted model (or any OpenAI-style
// endpoint) into the agent dir: models.json and settings.json (no retries,
// so a failing model fails fast). Run by the runtime's own node:
//   node pi-setup.mjs AGENT_DIR BASE_URL MODEL API_KEY_ENV
import fs from "node:fs";
import path from "node:path";

const [agentDir, baseUrl, model, apiKeyEnv] = process.argv.slice(2);
if (!agentDir || !baseUrl || !model || !apiKeyEnv) {
  console.error("usage: pi-setup.mjs AGENT_DIR BASE_URL MODEL API_KEY_ENV");
  process.exit(2);
}
fs.mkdirSync(agentDir, { recursive: true, mode: 0o700 });
const models = {
  providers: {
    fake: {
      baseUrl,
      api: "openai-completions",
      apiKey: apiKeyEnv,
      compat: { supportsDeveloperRole: false },
      models: [{ id: model, name: model, contextWindow: 128000, maxTokens: 4096 }],
    },
  },
};
const settings = { retry: { enabled: false, provider: { maxRetries: 0 } } };
fs.writeFileSync(path.join(agentDir, "models.json"), JSON.stringify(models, null, 2) + "\n", { mode: 0o600 });
fs.writeFileSync(path.join(agentDir, "settings.json"), JSON.stringify(settings, null, 2) + "\n", { mode: 0o600 });
console.log("pi config written to " + agentDir);
