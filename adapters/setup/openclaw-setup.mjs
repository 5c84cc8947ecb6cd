// Writes OpenClaw's config for the scripted model (or any OpenAI-style
// endpoint with /v1/responses): one custom provider "fake" (api
// openai-responses: over openai-completions OpenClaw rewrites every tool
// call id to letters and digits when it sends the result back, so the
// result answers no call the model made) at BASE_URL whose key OpenClaw reads from the variable API_KEY_ENV when it
// loads the config (the file holds "${NAME}", never the key), the model
// as the agents' primary, and nothing else. `agent exec --config FILE`
// runs against exactly this file. Run by the runtime's own node:
//   node openclaw-setup.mjs CONFIG_DIR BASE_URL MODEL API_KEY_ENV
import fs from "node:fs";
import path from "node:path";

const [configDir, baseUrl, model, apiKeyEnv] = process.argv.slice(2);
if (!configDir || !baseUrl || !model || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(apiKeyEnv || "")) {
  console.error("usage: openclaw-setup.mjs CONFIG_DIR BASE_URL MODEL API_KEY_ENV");
  process.exit(2);
}
fs.mkdirSync(configDir, { recursive: true, mode: 0o700 });
const config = {
  models: {
    // replace: only this provider, no catalog discovery (offline).
    mode: "replace",
    providers: {
      fake: {
        baseUrl,
        api: "openai-responses",
        apiKey: "${" + apiKeyEnv + "}",
        models: [{ id: model, name: model, reasoning: false, input: ["text"], contextWindow: 128000, maxTokens: 4096 }],
      },
    },
  },
  agents: { defaults: { model: { primary: "fake/" + model } } },
};
const file = path.join(configDir, "openclaw.json");
fs.writeFileSync(file, JSON.stringify(config, null, 2) + "\n", { mode: 0o600 });
console.log("openclaw config written to " + file);
